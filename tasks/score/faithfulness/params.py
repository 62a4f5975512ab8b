"""Faithfulness' parameters (docs/metrics/faithfulness.md): retrieval sizes, support ramps, derivation
limits, cache bounds and the LLM judge's request budget."""

MIN_WORDS = 4
BM25_K = 8
NUM_K = 4
UNIT_K = 3
COMMON_SHARE, COMMON_MIN = 0.05, 20  # a figure in more passages than both is too common to select on
PROSE_RAMP = (0.55, 0.85)  # cosine -> text support, claims without a strong figure (as coverage)
NUMBER_RAMP = (0.35, 0.70)  # ... claims with a strong figure, which must match as well (as coverage)
VERBATIM_MIN_CHARS = 20
EVIDENCE_CHARS = 800
SPECIFIC_DIGITS = 4  # significant digits that make a figure specific enough to count when stated elsewhere
WIDE_DIGITS = 3  # figures of this many significant digits may use the wide derivation pool, and ratios
DERIVE_POOL = 40  # at most this many distinct magnitudes in a derivation pool
# grounding sets kept built per judge (LRU), bounded by their text (~15 bytes of index per character):
# an embed-ahead pass walks every set of a run before the score tasks walk them again
GROUND_CACHE, GROUND_CACHE_CHARS = 64, 24_000_000
CLAIMS_KEPT = 512  # reports whose extracted claims a judge keeps (the embed task's, for the score tasks)
NOTE_WORDS = 80  # a passage of at most this many words stating a unit states it for the table after it

# the LLM judge (docs/metrics/faithfulness.md, "Evidence of the LLM judge")
BATCH_CLAIMS = 10
CLAIM_TOKENS = 300  # allowance per claim in a request: its text, sentence, section, verdict, excerpt ids
VERDICT_TOKENS = 150  # the first-pass verdict shown to stage 2 is cut to this
MIN_EVIDENCE = 1500  # tokens of excerpts per claim at least (stage 1), however small the window
REFS_SHOWN = 10  # excerpts a claim names as found for it (the request's other excerpts are shown too)
MORE_K = 40  # BM25 passages ranked after the offline candidates when G goes as excerpts
