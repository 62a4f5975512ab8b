"""Benchmark: how often the LLM faithfulness verifier is shown the passage a claim comes from.

The offline gold reports Y of a release are extractive (tasks/synthesize/offline/fill.py copies sentences,
list items and table rows of G; paper sentences only lose citation keys and cross-references), so every
sentence of Y has a known source in G. For each instance this takes the claims of Y (the offline
extraction, `claims_of`; the driver's seeded sample of `MAX_ITEMS`), runs `LLMFaithfulnessJudge.verify`
and `.entail` on them with a recording client in place of the model (every verdict 0, so every claim goes
on to stage 2: the largest stage-2 batches), and checks, per claim and stage, whether the evidence of the
request that carries the claim holds the claim's source.

- **Source** (located here, independently of the judge's retrieval): the sentence or row of G the claim
  was copied from, whitespace and emphasis normalised: the claim's text found in a document of G, else
  (a cleaned paper sentence) the span of G whose words contain the claim's words in order with gaps of
  at most 12 words. A table row's source is the row together with its table's header line (a row
  without its header says nothing checkable). A claim whose source is nowhere in G (a comparison grid of
  a survey, the fixed "No information ..." sentence) is *unattributed*: counted, not in the share.
- **Evidence** of a claim: the `<<< ... >>>` bodies of its request (documents or excerpts) that the
  claim is shown with: those before the first claim of the request (shared by the batch) and those
  inside the claim's own `### Claim <id>` block. The claim's own text is never part of it.

Claims come in two regimes: *extracted* (Y's own sentences, which G holds word for word, so the
verifier's word-for-word lookup finds them) and *reworded* (`reworded`: the same words, the second half
of each sentence first, so that retrieval has to find the source by terms and figures, as for a report
that paraphrases). Both are measured for two context windows: the default of LLMSettings (128,000
tokens: most G fit whole) and 32,000 (a small local model's: most G go as excerpts).

Prints, per window, regime, category (financial = 10-K/10-Q instances, academic = paper sets) and stage,
the share of attributed claims whose source is in the evidence, then the largest request in tokens
against the input budget, beside the same figures of the named baseline: the code of the commit in
benchmarks/baselines.json "retrieval_recall", checked out as a temporary `git worktree` and run with
this venv (its recorded figures when the commit is not in the repository). PASS when every share is at
least 0.95 and every request fits the budget (a report: it exits 0 either way). Offline: no model, no
network; the release is the demo one that `make demo` builds from ../shared/corpus.

**Fill evidence** (issue 42, point 6; after the verifier's figures, skipped with `--no-fill`): the share of
each content element's supporting passages that the gold build's fill step gives the element. For every
gold report of the release, the offline fill is replayed on the release's own structure, outline and G
(`fill_report` with the offline backend; a report whose replay is not byte-identical to the release's is
left out and counted), which gives each element's content. The element's *supporting sources* are the G
sources (located by `Sources`, as above) of the claims of its content (`claims_of`: its sentences, list
items and table rows). The fill retrieval under test is `RetrievalIndex` over G with the passage budget
the build's fill task gives an LLM backend (`fill_budget`: 12,000 tokens for the default 128,000-token
window, 8,000 for 32,000), once as it was (`search`, top 8 that fit) and once as it is
(`search_budget`: the budget filled, tasks/synthesize/retrieve.py "Budget"); a source is *given* when
its text is in the normalised text of the element's passages. Printed per category: elements, the mean
per-element share (elements with at least one attributed source), the pooled share (sources given / all),
the mean passage tokens and passages per element; the offline backend's own retrieval (1,500 tokens, top
8) is printed first as a check of the oracle. FILL PASS when every element's filled passages fit the
budget, contain every passage the top 8 gave (so no share can fall) and no share is below the top 8's.

What this figure says and does not say. The offline gold's content was itself selected from the
offline retrieval's passages (top 8 within 1,500 tokens, same ranking), so its sources are by
construction near the top of the ranking, and the offline row is ~1 trivially. For the LLM budgets the
figure says (a) whether a retrieval keeps the passages that ranking put first: a plain top 8 under a
larger budget loses the sources that the 1,500-token budget reached further down, after skipping
passages too long for it; and (b) how many more evidence tokens the filled budget costs per element.
It does not say whether the passages added beyond those are useful to an LLM writer, nor what share
of the information an LLM-written gold would draw on they hold: the supporting set is defined by the
same ranking, so it cannot show recall gains deeper in the ranking (that would need a gold whose
content was not chosen from retrieved passages).

    .venv/bin/python benchmarks/retrieval_recall.py [--release data/releases/demo/0.1.0]
        [--context-tokens 128000 32000] [--max-output-tokens 4096] [--no-baseline] [--json out.json]
        [--no-fill | --fill-only] [--fill-json fill.json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 0.95
STAGES = ("stage1", "stage2")
REGIMES = ("extracted", "reworded")
CONTEXTS = (128_000, 32_000)  # the default window (LLMSettings), and a small local model's
MAX_GAP = 12  # words a cleaned paper sentence may have lost between two of its words (citation groups)

_MARK = re.compile(r"\*\*|__|`+|\\")
_WORD = re.compile(r"\w+")
_CLAIM = re.compile(r"^### Claim (\d+)\s*$", re.M)
_BODY = re.compile(r"<<<\n(.*?)\n>>>", re.S)


def norm(text: str) -> str:
    """Whitespace collapsed, Markdown emphasis and escapes dropped (the oracle's own reading)."""
    return " ".join(_MARK.sub("", text).split())


def family(category: str) -> str:
    return "financial" if category.startswith("financial") else "academic"


# ---------------------------------------------------------------- the sources of Y's claims in G


class Sources:
    """Where the sentences and rows of Y come from in one G (normalised text of each document)."""

    def __init__(self, docs: list[Any]) -> None:
        self.texts = [norm(d.markdown) for d in docs]
        self.raw = [d.markdown.split("\n") for d in docs]
        self.words: list[list[tuple[str, int, int]]] = [
            [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(t)] for t in self.texts
        ]
        self.at: list[dict[str, list[int]]] = []
        for ws in self.words:
            index: dict[str, list[int]] = defaultdict(list)
            for k, (w, _, _) in enumerate(ws):
                index[w].append(k)
            self.at.append(index)

    def of(self, content: str, source: str) -> list[list[str]] | None:
        """Alternative source sets (each a list of texts that must all be in the evidence), or None."""
        if source.strip().startswith("|"):
            return self._row(source) or None
        for text in (norm(source), norm(content)):
            if text and any(text in t for t in self.texts):
                return [[text]]
        span = self._in_order(norm(source or content))
        return [[span]] if span else None

    def _row(self, row: str) -> list[list[str]]:
        want = norm(row)
        out: list[list[str]] = []
        for lines in self.raw:
            for k, line in enumerate(lines):
                if norm(line) != want:
                    continue
                top = k
                while top > 0 and lines[top - 1].strip().startswith("|"):
                    top -= 1
                out.append([norm(lines[top]), want])
        return out

    def _in_order(self, text: str) -> str | None:
        """The span of G holding the words of `text` in order, at most MAX_GAP words apart."""
        want = [w.lower() for w in _WORD.findall(text)]
        if len(want) < 4:
            return None
        anchor = max(range(len(want)), key=lambda i: (len(want[i]), -i))
        for d, ws in enumerate(self.words):
            for pos in self.at[d].get(want[anchor], []):
                span = self._extend(ws, want, anchor, pos)
                if span is not None:
                    return self.texts[d][ws[span[0]][1] : ws[span[1]][2]]
        return None

    @staticmethod
    def _extend(
        ws: list[tuple[str, int, int]], want: list[str], anchor: int, pos: int
    ) -> tuple[int, int] | None:
        left = pos
        for w in reversed(want[:anchor]):
            k = next((j for j in range(left - 1, max(-1, left - 2 - MAX_GAP), -1) if ws[j][0] == w), None)
            if k is None:
                return None
            left = k
        right = pos
        for w in want[anchor + 1 :]:
            k = next((j for j in range(right + 1, min(len(ws), right + 2 + MAX_GAP)) if ws[j][0] == w), None)
            if k is None:
                return None
            right = k
        return left, right


# ---------------------------------------------------------------- the verifier's requests


class RecordingClient:
    """Stands in for tasks.llm.client.LLMClient: records each request and gives every claim the verdict 0
    (so that every claim goes on to stage 2)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, int]] = []  # (role, user message, tokens of all messages)

    def complete_json(self, role, messages, schema, ctx, *, check=None, **_options):
        # _options: the client's other keywords (e.g. what to do on a reply cut at the output limit): a
        # recording never has a reply to cut
        from tasks.llm.client import LLMResult
        from tasks.tokens import count_tokens

        user = messages[-1]["content"]
        ids = [int(x) for x in _CLAIM.findall(user)]
        verdicts = [
            {"claim_id": i, "score": 0.0, "evidence": "", "doc_id": "", "rationale": "-"} for i in ids
        ]
        value = schema.model_validate({"verdicts": verdicts})
        if check is not None:
            check(value)
        tokens = sum(count_tokens(m["content"]) for m in messages)
        self.requests.append((role, user, tokens))
        return LLMResult(
            value=value,
            text="",
            prompt_tokens=tokens,
            completion_tokens=0,
            cached=False,
            request_hash="",
            model="recording",
            attempts=1,
        )


def evidence_by_claim(user: str) -> dict[int, str]:
    """Per claim id of one request, the normalised text of the evidence bodies it is shown with."""
    heads = list(_CLAIM.finditer(user))
    if not heads:
        return {}
    shared = _BODY.findall(user[: heads[0].start()])
    out: dict[int, str] = {}
    for k, h in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(user)
        bodies = shared + _BODY.findall(user[h.end() : end])
        out[int(h.group(1))] = " ¶ ".join(norm(b) for b in bodies)
    return out


def reworded(claim: Any) -> Any:
    """The claim as a paraphrasing report would state it, for retrieval: the same words, the second half
    of the sentence first, so that no passage of G holds it word for word (a table row: its rendering
    "<context>: <label> | <header>: <value>; ...", which G does not hold either)."""
    words = claim.content.split()
    half = len(words) // 2
    text = (
        " ".join(words[half:] + words[:half])
        if not claim.source_sentence.strip().startswith("|")
        else claim.content
    )
    return claim.model_copy(update={"content": text, "source_sentence": text})


def measure(release: Path, context_tokens: int, max_output_tokens: int, regime: str) -> dict[str, Any]:
    """{family: {stage: [covered, attributed], "unattributed": n, "claims": n}, "max_tokens": {stage: n},
    "input_budget": n} over every instance of `release`; `regime` "extracted" (Y's claims as they are)
    or "reworded" (each claim through `reworded`: found by its terms and figures, not word for word)."""
    import pandas as pd

    from schemas.config import LLMSettings
    from tasks.score.faithfulness import LLMFaithfulnessJudge, claims_of
    from tasks.score.inputs import grounding_of
    from tasks.score.judges import MAX_ITEMS, sample_items
    from tasks.score.llm_judge import input_budget

    settings = LLMSettings(
        backend="openai",
        model="recall-bench",
        context_tokens=context_tokens,
        max_output_tokens=max_output_tokens,
    )
    figures: dict[str, Any] = {}
    top = {s: 0 for s in STAGES}
    instances = pd.read_parquet(release / "instances.parquet").sort_values("instance_id")
    for inst in instances.to_dict("records"):
        docs = list(grounding_of(release, str(inst["grounding_set_id"])))
        claims = sample_items(claims_of(str(inst["target_markdown"])), MAX_ITEMS, 0)
        if not claims:
            continue
        asked = [reworded(c) for c in claims] if regime == "reworded" else claims
        client = RecordingClient()
        judge = LLMFaithfulnessJudge(client, settings)
        first = judge.verify(asked, docs)
        n1 = len(client.requests)
        judge.entail(asked, first, docs)
        seen = {"stage1": {}, "stage2": {}}
        for k, (_, user, tokens) in enumerate(client.requests):
            stage = "stage1" if k < n1 else "stage2"
            seen[stage].update(evidence_by_claim(user))
            top[stage] = max(top[stage], tokens)
        src = Sources(docs)
        fig = figures.setdefault(family(str(inst["category"])), {"unattributed": 0, "claims": 0})
        for c in claims:
            fig["claims"] += 1
            alternatives = src.of(c.content, c.source_sentence)
            if alternatives is None:
                fig["unattributed"] += 1
                continue
            for stage in STAGES:
                ev = seen[stage].get(c.claim_id, "")
                hit = any(all(t in ev for t in alt) for alt in alternatives)
                pair = fig.setdefault(stage, [0, 0])
                pair[0] += int(hit)
                pair[1] += 1
    return {**figures, "max_tokens": top, "input_budget": input_budget(settings)}


# ---------------------------------------------------------------- the fill step's evidence per element

OFFLINE_FILL = (1500, 8)  # the offline backend's fill retrieval: budget, top k (flows/build.py)


def fill_budget_for(context_tokens: int) -> int:
    """The passage budget the build's fill task gives an LLM backend with this context window."""
    from schemas.config import LLMSettings
    from tasks.synthesize.estimate import fill_budget

    return fill_budget(LLMSettings(backend="openai", model="recall-bench", context_tokens=context_tokens))


def _fill_row() -> dict[str, Any]:
    return {
        "elements": 0,
        "attributed": 0,
        "share_sum": 0.0,
        "given": 0,
        "sources": 0,
        "tokens": 0,
        "passages": 0,
    }


def measure_fill(release: Path, contexts: list[int]) -> dict[str, Any]:
    """{"reports", "identical", "rows": {label: {"budget", family: figures}}, "violations": [...]}: per
    retrieval (label), per family, the share of each element's supporting sources in its passages."""
    import pandas as pd

    from schemas.release_rows import structure_from_row
    from tasks.ground.load import grounding_set_from_rows
    from tasks.llm.backend import StepContext
    from tasks.score.faithfulness import claims_of
    from tasks.score.inputs import grounding_of
    from tasks.synthesize.fill import fill_report
    from tasks.synthesize.offline import OfflineBackend
    from tasks.synthesize.retrieve import RetrievalIndex

    labels: dict[str, tuple[int, str]] = {
        f"offline {OFFLINE_FILL[0]:,}, top 8 (the gold's)": (OFFLINE_FILL[0], "top8")
    }
    for n in contexts:
        b = fill_budget_for(n)
        labels[f"{n // 1000}k: {b:,}, top 8 (before)"] = (b, "top8")
        labels[f"{n // 1000}k: {b:,}, filled (now)"] = (b, "filled")
    out: dict[str, Any] = {"reports": 0, "identical": 0, "violations": []}
    rows: dict[str, dict[str, Any]] = {label: {"budget": b} for label, (b, _) in labels.items()}
    reports = pd.read_parquet(release / "reports.parquet").sort_values("report_id")
    structures = {
        str(r["report_id"]): r for r in pd.read_parquet(release / "structures.parquet").to_dict("records")
    }
    grounding = pd.read_parquet(release / "grounding_documents.parquet")
    by_set = {str(k): g.to_dict("records") for k, g in grounding.groupby("grounding_set_id")}
    for rep in reports.to_dict("records"):
        rid, fam = str(rep["report_id"]), family(str(rep["category"]))
        out["reports"] += 1
        if rid not in by_set or rid not in structures:
            continue
        structure = structure_from_row(structures[rid])
        gset = grounding_set_from_rows(by_set[rid])
        ctx = StepContext(
            str(rep["domain"]),
            str(rep["snapshot"]),
            str(rep["category"]),
            "edgar" if fam == "financial" else "arxiv",
        )
        replay = fill_report(OfflineBackend(), str(rep["outline"]), structure, gset, ctx)
        if replay.report != str(rep["markdown"]):
            continue  # the offline fill of this checkout no longer gives the release's gold: not measured
        out["identical"] += 1
        src = Sources(list(grounding_of(release, rid)))
        index = RetrievalIndex(gset)
        for node_id, content in replay.contents.items():
            node = structure.find(node_id)
            wanted = [
                a for c in claims_of(content) if (a := src.of(c.content, c.source_sentence)) is not None
            ]
            top8: dict[int, list[Any]] = {}
            for label, (budget, how) in labels.items():
                if how == "top8":
                    passages = index.search(node, structure, budget_tokens=budget, k=8)
                    top8[budget] = passages
                else:
                    passages = index.search_budget(node, structure, budget_tokens=budget)
                    base = {(p.doc_id, p.text) for p in top8[budget]}
                    if sum(p.tokens for p in passages) > budget or not base <= {
                        (p.doc_id, p.text) for p in passages
                    }:
                        out["violations"].append(f"{rid} {node_id} ({label})")
                evidence = " ¶ ".join(norm(p.text) for p in passages)
                given = sum(any(all(t in evidence for t in alt) for alt in alts) for alts in wanted)
                f = rows[label].setdefault(fam, _fill_row())
                f["elements"] += 1
                f["tokens"] += sum(p.tokens for p in passages)
                f["passages"] += len(passages)
                if wanted:
                    f["attributed"] += 1
                    f["share_sum"] += given / len(wanted)
                    f["given"] += given
                    f["sources"] += len(wanted)
    out["rows"] = rows
    return out


def fill_table(fill: dict[str, Any]) -> bool:
    """Print the fill figures; True when the filled evidence fits its budget, holds the top 8's passages
    and no share is below the top 8's."""
    print(
        f"fill evidence per content element: {fill['identical']} of {fill['reports']} gold reports replayed "
        "identically by the offline fill (the others are not measured)"
    )
    print(
        f"{'retrieval (budget, passages)':<36}{'category':<11}{'elements':>9}{'share/elem.':>12}"
        f"{'pooled':>22}{'tokens/elem.':>14}{'passages/elem.':>16}"
    )
    ok = not fill["violations"]
    before: dict[tuple[int, str], float] = {}
    for label, row in fill["rows"].items():
        for fam in ("financial", "academic"):
            f = row.get(fam)
            if not f:
                continue
            mean = f["share_sum"] / f["attributed"] if f["attributed"] else None
            pooled = f"{f['given'] / f['sources']:.3f} ({f['given']}/{f['sources']})" if f["sources"] else "-"
            print(
                f"{label:<36}{fam:<11}{f['elements']:>9}{(f'{mean:.3f}' if mean is not None else '-'):>12}"
                f"{pooled:>22}{f['tokens'] / f['elements']:>14,.0f}{f['passages'] / f['elements']:>16.1f}"
            )
            if mean is None:
                continue
            key = (row["budget"], fam)
            if label.endswith("(before)"):
                before[key] = mean
            elif label.endswith("(now)") and mean < before.get(key, 0.0):
                ok = False
    for v in fill["violations"][:10]:
        print(f"  over budget or missing a top-8 passage: {v}")
    print(
        ("FILL PASS" if ok else "FILL FAIL")
        + ": every element's filled passages fit the budget and hold the top 8's, no share below the top 8's"
    )
    return ok


# ---------------------------------------------------------------- baseline and report


def baseline_run(commit: str, release: Path, extra: list[str]) -> dict[str, Any] | None:
    """This script's measurement run with the code of `commit` (a temporary worktree), or None."""
    from benchmarks.baseline_code import checkout

    with checkout(commit) as tree:
        if tree is None:
            return None
        (tree / "benchmarks").mkdir(exist_ok=True)
        shutil.copy(Path(__file__), tree / "benchmarks" / "retrieval_recall.py")
        with tempfile.TemporaryDirectory(prefix="recall-") as tmp:
            out = Path(tmp) / "baseline.json"
            cmd = [sys.executable, str(tree / "benchmarks" / "retrieval_recall.py"), "--measure-only"]
            cmd += ["--release", str(release.resolve()), "--json", str(out), *extra]
            done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"baseline {commit[:10]}: failed ({done.stderr.strip().splitlines()[-1:]})")
                return None
            return json.loads(out.read_text(encoding="utf-8"))


def share(pair: list[int] | None) -> float | None:
    return pair[0] / pair[1] if pair and pair[1] else None


def table(figures: dict[str, Any], base: dict[str, Any] | None, label: str) -> bool:
    """Print the figures of every context window and regime (the baseline's beside them); True when every
    share reaches TARGET and every request fits the input budget."""
    ok = True
    print(
        f"{'context':>8}  {'claims':<10}{'category':<11}{'claims':>7}{'unattr.':>8}{'stage':>6}"
        f"{label:>20}  this checkout"
    )
    for context, by_regime in figures.items():
        for regime in REGIMES:
            for fam in ("financial", "academic"):
                f = by_regime[regime].get(fam)
                if not f:
                    continue
                for stage in STAGES:
                    now = share(f.get(stage))
                    was = share((base or {}).get(context, {}).get(regime, {}).get(fam, {}).get(stage))
                    ok &= now is not None and now >= TARGET
                    was_s = f"{was:.3f}" if was is not None else "-"
                    now_s = f"{now:.3f} ({f[stage][0]}/{f[stage][1]})" if now is not None else "-"
                    row = f"{context:>8}  {regime:<10}{fam:<11}{f['claims']:>7}{f['unattributed']:>8}"
                    print(f"{row}{stage[-1]:>6}{was_s:>20}  {now_s}")
    for context, by_regime in figures.items():
        for regime in REGIMES:
            got = by_regime[regime]
            was = (base or {}).get(context, {}).get(regime, {}).get("max_tokens", {})
            for stage in STAGES:
                ok &= got["max_tokens"][stage] <= got["input_budget"]
            print(
                f"context {context}, {regime}: largest request {got['max_tokens']['stage1']} / "
                f"{got['max_tokens']['stage2']} tokens (stage 1 / 2; input budget {got['input_budget']})"
                + (f", baseline {was['stage1']} / {was['stage2']}" if was else "")
            )
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path, default=ROOT / "data" / "releases" / "demo" / "0.1.0")
    ap.add_argument(
        "--context-tokens", type=int, nargs="+", default=list(CONTEXTS), help="the judge's context windows"
    )
    ap.add_argument("--max-output-tokens", type=int, default=4096)
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the baseline commit")
    ap.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, default=None, help="write the figures there")
    fill = ap.add_mutually_exclusive_group()
    fill.add_argument("--no-fill", action="store_true", help="skip the fill evidence figures")
    fill.add_argument("--fill-only", action="store_true", help="only the fill evidence figures")
    ap.add_argument("--fill-json", type=Path, default=None, help="write the fill figures there")
    args = ap.parse_args()
    if not (args.release / "instances.parquet").is_file():
        sys.exit(f"{args.release}: no release there (run `make demo` first)")
    if args.fill_only:
        report_fill(args)
        return
    figures = {
        str(n): {regime: measure(args.release, n, args.max_output_tokens, regime) for regime in REGIMES}
        for n in args.context_tokens
    }
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    if args.measure_only:
        return
    ref = json.loads((ROOT / "benchmarks" / "baselines.json").read_text(encoding="utf-8"))["retrieval_recall"]
    base, label = None, "baseline (recorded)"
    if not args.no_baseline:
        extra = [
            "--context-tokens",
            *map(str, args.context_tokens),
            "--max-output-tokens",
            str(args.max_output_tokens),
        ]
        base = baseline_run(ref["commit"], args.release, extra)
        label = f"baseline {ref['commit'][:7]}"
    if base is None and args.max_output_tokens == ref["max_output_tokens"]:
        base, label = ref["value"], "baseline (recorded)"
    print(
        f"release {args.release}: evidence of the LLM faithfulness verifier "
        f"(max_output_tokens {args.max_output_tokens})"
    )
    print(f"baseline: {ref['name']}")
    ok = table(figures, base, label)
    print(("PASS" if ok else "FAIL") + f": every share >= {TARGET} and every request within the input budget")
    if not args.no_fill:
        print()
        report_fill(args)


def report_fill(args: argparse.Namespace) -> None:
    fill = measure_fill(args.release, args.context_tokens)
    if args.fill_json:
        args.fill_json.write_text(json.dumps(fill, indent=1), encoding="utf-8")
    fill_table(fill)


if __name__ == "__main__":
    main()
