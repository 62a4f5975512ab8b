"""Judge meta-evaluation (paper 000 Table 5; paper 003 compares judge families): re-score human-annotated
coverage and faithfulness items with one or more judges and tabulate their agreement.

`load_annotations` joins the human scores with the blind sheet of `frame annotate`; `judge_items`
re-scores every item with every judge (a coverage item: its information unit against the system's
report; a faithfulness item: its claim against the instance's grounding documents, both stages);
`judge_table` gives PA@0, PA@25, QWK and ICC of each judge against the human scores and, with two
judges or more, of each judge against the other. Scores are on the 0-100 scale of `frame align`.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from schemas.scoring import Claim, GroundingText, InfoUnit
from tasks.errors import FrameInputError
from tasks.generate.baselines import GENERATORS, generate_report, grounding_rows_for
from tasks.generate.runs import load_release_inputs, runs_folder
from tasks.meta.reports import Generations, check_system
from tasks.score.align import alignment, read_rows, read_table, scores_of, shown
from tasks.score.coverage import LLMCoverageJudge, OfflineCoverageJudge
from tasks.score.faithfulness import LLMFaithfulnessJudge, OfflineFaithfulnessJudge
from tasks.score.inputs import grounding_of
from tasks.score.judges import SUPPORT_THRESHOLD, CoverageJudge, FaithfulnessJudge
from tasks.score.metric import JudgeEnv

__all__ = [
    "GOLD",
    "JUDGE_KINDS",
    "METRICS",
    "SHEET_COLUMNS",
    "TABLE_COLUMNS",
    "ItemJudge",
    "ItemSource",
    "ReleaseSource",
    "judge_items",
    "judge_json",
    "judge_table",
    "load_annotations",
    "make_judges",
]

METRICS = ("coverage", "faithfulness")  # the families whose items `frame annotate` exports
SHEET_COLUMNS = ("item_id", "instance_id", "system", "kind", "text", "source")
TABLE_COLUMNS = ("metric", "judge", "against", "n", "pa0", "pa25", "qwk", "icc", "icc_a1")
JUDGE_KINDS = ("offline", "openai")
GOLD = "gold"  # the pseudo-system of `frame score`: the gold report Y itself
HUMAN = "human"


# ---------------------------------------------------------------- annotations


def _sheet_of(path: Path, rows: list[tuple[int, dict[str, str]]]) -> pd.DataFrame:
    """The sheet's rows (SHEET_COLUMNS, as text); a repeated item_id or a system that is not a system
    name (a path: `../../x`) is an input error naming the file."""
    sheet = pd.DataFrame([row for _, row in rows], columns=list(SHEET_COLUMNS), dtype=object)
    dupes = sheet["item_id"][sheet["item_id"].duplicated()]
    if len(dupes):
        raise FrameInputError(path, f"duplicate item_id {shown(dupes.iloc[0])}")
    for line, row in rows:
        check_system(row["system"], path, f"row at line {line}: ")
    return sheet


def _sheet(path: Path) -> pd.DataFrame:
    """The annotation sheet (items.csv of `frame annotate`), every column as text."""
    if not os.path.lexists(path):
        raise FrameInputError(path, "missing: the annotation sheet (items.csv of `frame annotate`)")
    return _sheet_of(path, read_rows(path, SHEET_COLUMNS))


def _split_id(path: Path, row: Mapping[str, str]) -> tuple[str, int]:
    """(metric, index) of an item id `<instance_id>|<system>|<metric>|<index>` (as `frame score` writes)."""
    head, _, index = row["item_id"].rpartition("|")
    head, _, metric = head.rpartition("|")
    if head != f"{row['instance_id']}|{row['system']}" or not index.isdigit():
        raise FrameInputError(
            path, f"item_id {shown(row['item_id'])} is not <instance_id>|<system>|<metric>|<index> of its row"
        )
    if metric not in METRICS:
        raise FrameInputError(
            path, f"item {shown(row['item_id'])}: metric {shown(metric)} is not one of {', '.join(METRICS)}"
        )
    return metric, int(index)


def load_annotations(human: str | Path, items: str | Path | None = None) -> pd.DataFrame:
    """The human-scored items: item_id, instance_id, system, metric, index, kind, text, source, human.

    `human` holds item_id,score (0-100, as `frame align` reads it); the item texts come from the same
    file when it has the sheet's columns, else from `items` (default: items.csv beside `human`). Items
    of the sheet without a human score are left out; a human score for an item not in the sheet, or an
    item id that does not name its metric and index, is an input error."""
    human = Path(human)
    header, rows = read_table(human, ("item_id", "score"), SHEET_COLUMNS)
    scores = scores_of(human, rows)
    if set(SHEET_COLUMNS) <= set(header) and items is None:
        sheet_path, sheet = human, _sheet_of(human, rows)
    else:
        sheet_path = Path(items or human.with_name("items.csv"))
        sheet = _sheet(sheet_path)
    unknown = sorted(set(scores) - set(sheet["item_id"]))
    if unknown:
        raise FrameInputError(
            human, f"item_id {shown(unknown[0])} is not in the annotation sheet {sheet_path}"
        )
    sheet = sheet[sheet["item_id"].isin(set(scores))].copy()
    parsed = [_split_id(sheet_path, row) for row in sheet.to_dict("records")]
    sheet["metric"] = [m for m, _ in parsed]
    sheet["index"] = [i for _, i in parsed]
    sheet["human"] = sheet["item_id"].map(scores).astype(float)
    cols = ["item_id", "instance_id", "system", "metric", "index", "kind", "text", "source", "human"]
    return sheet[cols].sort_values("item_id").reset_index(drop=True)


# ---------------------------------------------------------------- what the items point at


class ItemSource(Protocol):
    """Where an annotated item's context comes from: the system's report and the instance's G."""

    def report(self, instance_id: str, system: str) -> str: ...

    def grounding(self, instance_id: str) -> Sequence[GroundingText]: ...


class ReleaseSource:
    """Reports and grounding documents of a release: `gold` is the gold report, another system's report
    comes from `<generations>/<system>/generations.parquet`, else `<system>/reports/<instance>.md`
    (default generations: the release's data/generations/<name>/<version>), and a builtin baseline with
    neither is regenerated (it is deterministic). A system must be a system name, and only the one file
    needed is read, inside the generations folder (tasks.meta.reports): a link out of it, a FIFO or an
    oversized file is an input error naming the file."""

    def __init__(self, release: str | Path, generations: str | Path | None = None) -> None:
        self.release = Path(release)
        instances, self._rows = load_release_inputs(self.release)
        self.instances = {str(r["instance_id"]): r for r in instances.to_dict("records")}
        self.generations = Path(generations) if generations else runs_folder(self.release, GOLD).parent
        self._stored = Generations(self.generations)

    def _instance(self, instance_id: str) -> dict[str, Any]:
        if instance_id not in self.instances:
            raise FrameInputError(self.release, f"no instance {shown(instance_id)} in this release")
        return self.instances[instance_id]

    def report(self, instance_id: str, system: str) -> str:
        inst = self._instance(instance_id)
        if system == GOLD:
            return str(inst["target_markdown"])
        got = self._stored.table(system)  # checks the system name first
        if got is not None:
            if instance_id not in got or got[instance_id][1]:
                why = got[instance_id][1] if instance_id in got else "no report"
                raise FrameInputError(self.generations / system, f"{instance_id}: {shown(why, quoted=False)}")
            return got[instance_id][0]
        text = self._stored.report_file(system, instance_id)
        if text is not None:
            return text
        if system in GENERATORS:
            rows = grounding_rows_for(inst, self._rows.get(str(inst["grounding_set_id"]), []))
            return generate_report(system, inst, rows)
        raise FrameInputError(
            self.generations / system, f"missing: no report of system {system!r} for {instance_id}"
        )

    def grounding(self, instance_id: str) -> tuple[GroundingText, ...]:
        return grounding_of(self.release, str(self._instance(instance_id)["grounding_set_id"]))


# ---------------------------------------------------------------- judges


@dataclass(frozen=True)
class ItemJudge:
    """One judge family member: its coverage judge and its faithfulness judge (two-stage, `threshold`)."""

    coverage: CoverageJudge
    faithfulness: FaithfulnessJudge
    threshold: float = SUPPORT_THRESHOLD

    def name(self, metric: str) -> str:
        return (self.coverage if metric == "coverage" else self.faithfulness).name

    def grade(self, metric: str, items: pd.DataFrame, source: ItemSource) -> list[tuple[float, str]]:
        """(score in [0, 1], rationale) per item of one (instance, system), in `items` order."""
        iid, system = str(items["instance_id"].iloc[0]), str(items["system"].iloc[0])
        rows = items.to_dict("records")
        if metric == "coverage":
            units = [
                InfoUnit(unit_id=r["index"], type=r["kind"], content=r["text"], source_sentence=r["source"])
                for r in rows
            ]
            graded = self.coverage.grade(units, source.report(iid, system))
        else:
            claims = [
                Claim(claim_id=r["index"], content=r["text"], source_sentence=r["source"]) for r in rows
            ]
            graded = self._faithfulness(claims, source.grounding(iid))
        if [g.index for g in graded] != [r["index"] for r in rows]:
            raise ValueError(f"{self.name(metric)}: scores for other items than asked ({iid}, {system})")
        return [(float(g.score), g.rationale) for g in graded]

    def _faithfulness(self, claims: list[Claim], grounding: Sequence[GroundingText]) -> list[Any]:
        """Stage 1 for every claim, stage 2 for those below the threshold (as `faithfulness` does)."""
        first = self.faithfulness.verify(claims, grounding)
        low = [i for i, it in enumerate(first) if it.score < self.threshold]
        final = list(first)
        if low:
            second = self.faithfulness.entail([claims[i] for i in low], [first[i] for i in low], grounding)
            for i, it in zip(low, second, strict=True):
                final[i] = it
        return final


def make_judges(env: JudgeEnv, kinds: Sequence[str] = ("offline",)) -> dict[str, ItemJudge]:
    """{kind: ItemJudge} for `offline` (on the env's embedder) and `openai` (on its endpoint)."""
    out: dict[str, ItemJudge] = {}
    for kind in kinds:
        if kind == "offline":
            out[kind] = ItemJudge(
                OfflineCoverageJudge(env.embed, env.embedder),
                OfflineFaithfulnessJudge(env.embed, env.embedder),
            )
        elif kind == "openai":
            out[kind] = ItemJudge(
                LLMCoverageJudge(env.client, env.llm), LLMFaithfulnessJudge(env.client, env.llm)
            )
        else:
            raise FrameInputError("--judges", f"unknown judge {kind!r} (one of {', '.join(JUDGE_KINDS)})")
    return out


def judge_items(
    annotations: pd.DataFrame, judges: Mapping[str, ItemJudge], source: ItemSource
) -> pd.DataFrame:
    """Every annotated item scored by every judge: item_id, metric, judge, judge_name, score (0-100),
    rationale; sorted by judge (in `judges` order), then item_id. Items of one report go in one call."""
    rows: list[dict[str, Any]] = []
    groups = annotations.sort_values("index").groupby(["metric", "instance_id", "system"], sort=True)
    for key, judge in judges.items():
        mine: list[dict[str, Any]] = []
        for (metric, _, _), items in groups:
            graded = judge.grade(str(metric), items, source)
            name = judge.name(str(metric))
            mine += [
                {
                    "item_id": i,
                    "metric": metric,
                    "judge": key,
                    "judge_name": name,
                    "score": 100.0 * s,
                    "rationale": w,
                }
                for i, (s, w) in zip(items["item_id"], graded, strict=True)
            ]
        rows += sorted(mine, key=lambda r: r["item_id"])
    return pd.DataFrame(rows, columns=["item_id", "metric", "judge", "judge_name", "score", "rationale"])


# ---------------------------------------------------------------- agreement


def _row(metric: str, judge: str, against: str, a: dict[str, float], b: dict[str, float]) -> dict[str, Any]:
    got = alignment(b, a)  # symmetric metrics: `b` plays the human's part
    return {
        "metric": metric,
        "judge": judge,
        "against": against,
        "n": got["n"],
        "pa0": got["pa@0"],
        "pa25": got["pa@25"],
        "qwk": got["qwk"],
        "icc": got["icc3_1"],
        "icc_a1": got["icc_a1"],
    }


def judge_table(annotations: pd.DataFrame, judged: pd.DataFrame) -> pd.DataFrame:
    """Paper 000 Table 5 per metric: each judge against the human scores (`against` = human), then each
    pair of judges (`against` = the earlier judge). Columns TABLE_COLUMNS; pa0/pa25 are fractions, icc
    is ICC(3,1) (the paper's), icc_a1 absolute agreement; undefined values are NaN."""
    judges = list(dict.fromkeys(judged["judge"]))
    rows: list[dict[str, Any]] = []
    for metric in [m for m in METRICS if m in set(annotations["metric"])]:
        ann = annotations[annotations["metric"] == metric]
        human = dict(zip(ann["item_id"], ann["human"], strict=True))
        scores = {}
        for j in judges:
            sub = judged[(judged["judge"] == j) & (judged["metric"] == metric)]
            scores[j] = dict(zip(sub["item_id"], sub["score"], strict=True))
        rows += [_row(metric, j, HUMAN, scores[j], human) for j in judges if scores[j]]
        for a, b in itertools.combinations(judges, 2):
            if scores[a] and scores[b]:
                rows.append(_row(metric, b, a, scores[b], scores[a]))
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS)).astype({"n": int})


def judge_json(table: pd.DataFrame, judged: pd.DataFrame) -> str:
    """JSON text: {"judges": {judge: {metric: judge name}}, "table": rows} (floats to 6 places, NaN null)."""
    names: dict[str, dict[str, str]] = {}
    for r in judged[["judge", "metric", "judge_name"]].drop_duplicates().to_dict("records"):
        names.setdefault(r["judge"], {})[r["metric"]] = r["judge_name"]
    rows = json.loads(table.to_json(orient="records", double_precision=6))
    return json.dumps({"judges": names, "table": rows}, indent=2, sort_keys=True)
