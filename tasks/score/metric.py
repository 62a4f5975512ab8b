"""The contract every metric family keeps: what it is called, what it reads, what it returns.

A family is one small class (`MetricFamily`): its metric names with range and direction, the inputs it
reads, and `score(inputs) -> [MetricResult]` (each result carrying its evidence items). Judges (offline
or LLM) are chosen once, in `__init__`, from a `JudgeEnv`. The flow only talks to this contract; the
registry (`tasks.score.registry`) lists the families. How to write one: docs/extending.md.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.config import LLMSettings
from schemas.scoring import GroundingText, MetricResult, ScoreSettings
from tasks.errors import FrameInputError

__all__ = [
    "ComparisonFamily",
    "Inputs",
    "instance_seed",
    "JudgeEnv",
    "MetricFamily",
    "MetricSpec",
    "llm_identity",
    "parquet_bytes",
]


@dataclass(frozen=True)
class MetricSpec:
    """One metric of a family: its name, value range and direction, and the table group it shows in."""

    name: str
    low: float = 0.0
    high: float = 1.0
    higher_is_better: bool = True
    group: str = ""  # side-by-side tables group metrics by this (default: the family name)
    # what its evidence items are, for the diagnostic page: "recall" (gold units R' should convey),
    # "support" (claims of R' checked against a reference), "" (anything else)
    evidence: str = ""
    saturation_baseline: bool = False  # a direct-score proxy shown beside, never a voter or a ranking
    # aspects the metric checklist (tasks/meta/checklist.py, `Perturbation.what`) does not hold it to, each
    # with the reason: a meaning it does not look at (("order", "recall wherever units stand"), ...) or a
    # form it grades (a rubric sees paragraphing); docs/metrics/robustness.md prints them as not claimed
    unclaimed: tuple[tuple[str, str], ...] = ()

    @property
    def range(self) -> tuple[float, float]:
        return (self.low, self.high)


@dataclass(frozen=True)
class Inputs:
    """Everything a family may read for one (instance, system); only what it declares is filled in."""

    instance_id: str
    generated: str
    gold: str = ""
    sample: str = ""
    grounding: tuple[GroundingText, ...] = ()
    context: Mapping[str, str] = field(default_factory=dict)
    prepared: dict[str, Any] | None = None
    seed: int = 0  # per-instance sampling seed: every system of an instance gets the same one


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def llm_identity(llm: LLMSettings | None) -> dict[str, Any]:
    """What of the endpoint settings changes a judge's output (never the key)."""
    if llm is None:
        return {}
    return {
        "backend": llm.backend,
        "base_url": llm.base_url,
        "model": llm.model,
        "temperature": llm.temperature,
    }


class JudgeEnv:
    """What judges are built from: the score settings, the endpoint, the cache folder, and the shared
    embedder and LLM client (each made on first use, then shared by every family of this env)."""

    def __init__(
        self,
        settings: ScoreSettings,
        llm: LLMSettings | None,
        cache_dir: Path,
        embed_llm: LLMSettings | None = None,
    ) -> None:
        self.settings = settings
        self.llm = llm  # the judge role's endpoint
        self.embed_llm = embed_llm  # the embedder role's endpoint (None: the judge's)
        self.cache_dir = Path(cache_dir)
        self._lock = threading.Lock()
        self._embed: tuple[Callable[[Sequence[str]], Any], str] | None = None
        self._client: Any = None

    @property
    def offline(self) -> bool:
        return self.settings.judge != "openai"

    @property
    def uses_llm(self) -> bool:
        """Whether any judge of this env talks to the endpoint (then its identity is in cache keys)."""
        s = self.settings
        return s.judge == "openai" or s.tree == "llm" or s.embedder != "minilm"

    def identity(self) -> dict[str, Any]:
        """The endpoints' identity (judge, plus the embedder's when it has its own): part of cache keys."""
        out = llm_identity(self.llm)
        if self.embed_llm is not None:
            out = {**out, "embedder_endpoint": llm_identity(self.embed_llm)}
        return out

    def key(self) -> str:
        return json.dumps(
            [self.settings.model_dump(mode="json"), self.identity(), str(self.cache_dir)],
            sort_keys=True,
        )

    @property
    def embed(self) -> Callable[[Sequence[str]], Any]:
        return self._embedder()[0]

    @property
    def embedder(self) -> str:
        """The embedder's name, recorded in judge names."""
        return self._embedder()[1]

    def _embedder(self) -> tuple[Callable[[Sequence[str]], Any], str]:
        with self._lock:
            if self._embed is None:
                self._embed = _make_embedder(self.settings, self.embed_llm or self.llm, self.cache_dir)
            return self._embed

    @property
    def client(self) -> Any:
        """The validated, cached LLM client (tasks.llm.client.LLMClient); an input error without one."""
        with self._lock:
            if self._client is None:
                llm = self.llm
                if llm is None or llm.backend != "openai" or not llm.base_url:
                    raise FrameInputError(
                        "--judge",
                        "the openai judge / llm trees need FRAME_LLM_BACKEND=openai and FRAME_LLM_BASE_URL",
                    )
                from tasks.llm.client import LLMClient

                self._client = LLMClient(llm, self.cache_dir)
            return self._client


def _make_embedder(settings: ScoreSettings, llm: LLMSettings | None, cache_dir: Path):
    from tasks.score.embed import (
        CachedEmbedder,
        LocalMiniLM,
        OpenAIEmbedder,
        make_embed_fn,
        resolve_precision,
    )

    if settings.embedder == "minilm":
        inner = LocalMiniLM(precision=resolve_precision(settings.embed_precision))
    elif settings.embedder.startswith("openai:"):
        if llm is None or not llm.base_url:
            raise FrameInputError(
                "--embedder", f"{settings.embedder} needs FRAME_LLM_BASE_URL / [llm] base_url"
            )
        inner = OpenAIEmbedder(llm, cache_dir, settings.embedder.split(":", 1)[1])
    else:
        raise FrameInputError(
            "--embedder", f"must be 'minilm' or 'openai:<model>' (got {settings.embedder!r})"
        )
    emb = CachedEmbedder(inner, cache_dir)
    return make_embed_fn(emb), emb.name


class MetricFamily:
    """A metric family: one cached task per (instance, system) computes all of its metrics at once.

    Subclasses set `name`, `metrics` and `reads`, choose their judges in `__init__(env)` and implement
    `score`. A family that needs one extraction per instance (from Y) sets `prepares = True` and
    implements `prepare`; its result reaches `score` as `inputs.prepared`."""

    name: ClassVar[str]
    metrics: ClassVar[tuple[MetricSpec, ...]]
    reads: ClassVar[frozenset[str]] = frozenset({"gold"})
    prepares: ClassVar[bool] = False
    summary: ClassVar[str] = ""  # one line for `frame metrics` (default: the class docstring's first line)

    def __init__(self, env: JudgeEnv) -> None:
        self.env = env

    def score(self, inputs: Inputs) -> list[MetricResult]:
        raise NotImplementedError

    def prepare(self, gold: str) -> dict[str, Any]:
        """The per-instance preparation from the gold report (JSON-able); families with prepares=True."""
        raise NotImplementedError

    def embedding_texts(self, inputs: Inputs) -> list[str]:
        """The texts `score(inputs)` will embed; [] for a family that embeds nothing. The flow embeds the
        texts of every (instance, system) of a run in one length-sorted batch before scoring, so a
        distinct text is embedded once and in full batches. Only a speed-up: a text missing here is
        embedded when `score` asks for it."""
        return []

    def embeds_ahead(self) -> bool:
        """Whether `embedding_texts` can name anything for this family's judges (else no embed task)."""
        return type(self).embedding_texts is not MetricFamily.embedding_texts

    def embed_ahead(self, inputs: Sequence[Inputs]) -> int:
        """Embed the distinct `embedding_texts` of every one of `inputs` in one call; returns how many.
        Last input first: a judge's per-instance caches (e.g. an LRU of grounding sets) then end up
        holding the first instances, which the score tasks start with."""
        texts = list(dict.fromkeys(t for x in reversed(list(inputs)) for t in self.embedding_texts(x)))
        if texts:
            self.env.embed(texts)
        return len(texts)

    def prepared_outputs(
        self, prepared: Mapping[str, dict[str, Any]]
    ) -> tuple[dict[str, bytes], dict[str, Any]]:
        """Extra output files ({file name: bytes}) and manifest entries from every instance's preparation."""
        return {}, {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("summary") and cls.__doc__:
            cls.summary = cls.__doc__.strip().splitlines()[0]

    @classmethod
    def metric_names(cls) -> tuple[str, ...]:
        return tuple(m.name for m in cls.metrics)

    @classmethod
    def inputs(cls, instance_id: str, generated: str, seed: int, **available: Any) -> Inputs:
        """The Inputs of one (instance, system) holding only what this family reads of `available`."""
        return Inputs(
            instance_id, generated, seed=seed, **{k: v for k, v in available.items() if k in cls.reads}
        )

    @classmethod
    def input_digests(cls, inputs: Inputs) -> dict[str, str]:
        """sha256 of every input the family reads: the data part of its cache key."""
        out = {"generated": _sha(inputs.generated)}
        for read in sorted(cls.reads):
            value = getattr(inputs, read)
            if read == "grounding":
                value = [list(d) for d in value]
            out[read] = _sha(
                value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
            )
        return out


class ComparisonFamily:
    """A family that compares the systems of one instance with each other (e.g. pairwise votes).

    It runs after the per-system families. Offline (`in_flow(env)` true) it is computed in the flow from
    the texts and the other families' values, with no judge call; otherwise one cached task per instance
    calls `compare`. `outputs` turns all votes into extra files and manifest entries."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    default_families: ClassVar[tuple[str, ...]] = ()  # computed when the selection names no family
    min_systems: ClassVar[int] = 2

    def __init__(self, env: JudgeEnv) -> None:
        self.env = env

    def in_flow(self) -> bool:
        return True

    def compare(
        self,
        instance_id: str,
        gold: str,
        reports: Mapping[str, str],
        values: Mapping[str, Mapping[str, float | None]],
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    def outputs(
        self, rows: list[dict[str, Any]], systems: list[str]
    ) -> tuple[dict[str, bytes], dict[str, Any]]:
        return {}, {}


def parquet_bytes(rows: list[dict[str, Any]], schema: pa.Schema) -> bytes:
    """`rows` as a Parquet file of `schema` (for the families' extra output files)."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink)
    return sink.getvalue().to_pybytes()


def instance_seed(seed: int, instance_id: str) -> int:
    """Per-instance sampling seed: every system of an instance is graded on the same gold units."""
    return int(_sha(f"{seed}|{instance_id}")[:8], 16)
