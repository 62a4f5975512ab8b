"""Source kinds are plugins: a third kind, defined here in a few lines, builds a release through the same
flows as filings and papers, and every place that used to branch on "edgar"/"arxiv" asks the registry.

The toy kind is "minutes": a club's meeting minutes, one plain-text file per meeting, a snapshot per
quarter. Its mirror is built by the test.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import ClassVar, Literal

import pyarrow.parquet as pq
import pytest

from schemas.config import FrameConfig
from schemas.documents import GroundingDocument, doc_kind
from schemas.domains import DomainBase, category_labels
from schemas.sources import RawFile
from tasks.errors import ConfigError, FrameInputError
from tasks.fetch.store import store_raw
from tasks.ground.documents import Grounded
from tasks.sources import RawSource, SourceKind, register, source_kind, source_kinds, unregister
from tasks.tokens import count_tokens

ROOT = Path(__file__).resolve().parents[1]

MEETINGS = {
    "2025Q1": [
        ("January meeting", "Treasurer: the club holds 1,240 euros. Dues rise to 30 euros from March."),
        ("March meeting", "The spring race moves to 12 April. Volunteers: Ana, Jon, Lea."),
    ],
    "2025Q2": [
        ("April meeting", "Treasurer: the club holds 1,610 euros after the race. 48 runners finished."),
        ("June meeting", "The summer camp is booked for 20 runners. Dues stay at 30 euros."),
    ],
    "2025Q3": [
        ("July meeting", "Treasurer: the club holds 980 euros after the camp. The camp cost 630 euros."),
        ("September meeting", "Autumn league starts 5 October. New members this quarter: 7."),
    ],
}


class MinutesDomain(DomainBase):
    kind: Literal["minutes"]
    club: str
    quarters: list[str]

    CATEGORIES: ClassVar[dict[str, str]] = {"club_minutes": "Club minutes"}

    @property
    def snapshots(self) -> list[str]:
        return list(self.quarters)

    def only(self, snapshot: str) -> MinutesDomain:
        return self.model_copy(update={"quarters": [snapshot]})


class MinutesKind(SourceKind):
    shape: ClassVar[type[DomainBase]] = MinutesDomain
    description: ClassVar[str] = "a club's meeting minutes, one text file per meeting"
    ground_steps: ClassVar[tuple[str, ...]] = ("read", "convert")

    def sniff(self, head: bytes) -> bool:
        return head.startswith(b"MINUTES\n")

    def fetch(self, cfg: FrameConfig, domain: MinutesDomain, snapshot: str) -> list[RawFile]:  # type: ignore[override]
        folder = Path(cfg.source.mirror) / "minutes" / domain.club / snapshot
        return [
            store_raw(
                cfg.build.data_dir,
                path.read_bytes(),
                ".txt",
                source="minutes",
                origin="mirror",
                location=path.relative_to(cfg.source.mirror).as_posix(),
                domain=domain.name,
                snapshot=snapshot,
                title=path.stem,
            )
            for path in sorted(folder.glob("*.txt"))
        ]

    def ground_step(self, step: str, src: RawSource, domain: DomainBase, earlier: tuple) -> object:
        if step == "read":
            return src.read().decode("utf-8")
        (text,) = earlier
        return self.ground_bytes(text.encode(), src.raw.location)

    def ground_bytes(self, data, source_name, *, expected=None, meta=None, source_ref=None) -> Grounded:
        lines = data.decode("utf-8").splitlines()
        title, body = lines[1], "\n".join(lines[2:]).strip()
        # a meeting's place in its quarter names it: the first meeting of one quarter continues the first
        # of the last (a form-restricted plan keeps the sections and finds their documents by id)
        doc_id = "meeting-" + Path(source_name).stem.rsplit("-", 1)[-1]
        md = f"# {title}\n\n{body}\n"
        sha = hashlib.sha256(data).hexdigest()
        doc = GroundingDocument(
            doc_id=doc_id,
            title=title,
            kind=doc_kind(len(md), 0),
            tokens=count_tokens(md),
            tables=0,
            images=0,
            source_sha256=sha,
            source_kind="minutes",
            file=f"{doc_id}.md",
        )
        return Grounded("minutes", sha, [doc], {doc.file: md})


@pytest.fixture
def minutes_kind():
    register(MinutesKind)
    yield source_kind("minutes")
    unregister("minutes")


def _mirror(tmp: Path) -> Path:
    for quarter, meetings in MEETINGS.items():
        folder = tmp / "mirror" / "minutes" / "harriers" / quarter
        folder.mkdir(parents=True)
        for i, (title, body) in enumerate(meetings):
            (folder / f"{quarter}-{i}.txt").write_text(f"MINUTES\n{title}\n{body}\n", encoding="utf-8")
    return tmp / "mirror"


def _config(tmp: Path) -> dict:
    return {
        "build": {"data_dir": str(tmp / "data")},
        "source": {"mode": "mirror", "mirror": str(_mirror(tmp))},
        "domains": [
            {
                "kind": "minutes",
                "name": "harriers",
                "category": "club_minutes",
                "club": "harriers",
                "quarters": list(MEETINGS),
            }
        ],
    }


def test_a_kind_nobody_registered_is_a_one_line_config_error(tmp_path):
    from tasks.config import load_config

    path = tmp_path / "c.toml"
    path.write_text(
        f'[source]\nmode = "mirror"\nmirror = "{tmp_path}"\n\n[[domains]]\nkind = "minutes"\nname = "x"\n'
        'category = "club_minutes"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert "\n" not in msg and "domains[0]" in msg and "'minutes'" in msg and "'edgar', 'arxiv'" in msg
    with pytest.raises(FrameInputError, match="unknown source kind 'minutes' \\(known: edgar, arxiv\\)"):
        source_kind("minutes", "--kind")


def test_a_registered_kind_is_known_everywhere(minutes_kind, tmp_path):
    from flows.steps import all_steps
    from tasks.sources import detect_kind, ground_source

    assert list(source_kinds()) == ["edgar", "arxiv", "minutes"]
    assert category_labels()["club_minutes"] == "Club minutes"
    # its steps join `frame rerun`'s list after fetch, in the kind's order
    steps = all_steps()
    assert steps.index("fetch") < steps.index("read") < steps.index("convert")
    cfg = FrameConfig.model_validate(_config(tmp_path))
    assert isinstance(cfg.domains[0], MinutesDomain) and cfg.domains[0].snapshots == list(MEETINGS)
    one = cfg.for_snapshot("harriers", "2025Q2")[1]
    assert one.snapshots == ["2025Q2"]
    data = b"MINUTES\nMay meeting\nNothing was decided.\n"
    assert detect_kind(data, "may.txt") == "minutes"
    assert ground_source(data, "may.txt").markdown == {
        "meeting-may.md": "# May meeting\n\nNothing was decided.\n"
    }


def test_a_third_kind_builds_a_release(minutes_kind, tmp_path, prefect_harness):
    from flows.release import build_and_publish

    cfg = FrameConfig.model_validate(_config(tmp_path))
    out = build_and_publish(cfg, ["harriers"], "club", "0.1.0")
    assert not out["failed"], out["failed"]
    release = Path(out["path"])
    instances = pq.read_table(release / "instances.parquet").to_pylist()
    # consecutive snapshots pair up: Q1 -> Q2 and Q2 -> Q3
    assert [(r["t_sample"], r["t_target"]) for r in instances] == [("2025Q1", "2025Q2"), ("2025Q2", "2025Q3")]
    assert {r["category"] for r in instances} == {"club_minutes"}
    grounding = pq.read_table(release / "grounding_documents.parquet").to_pylist()
    assert {r["source_kind"] for r in grounding} == {"minutes"}
    # the gold report of the last quarter is written from that quarter's minutes, not an earlier one's
    last = instances[-1]["target_markdown"]
    assert "980" in last and "1,240" not in last and "1,610" not in last, last
    # its plan speaks of its documents, not of a filing or papers it does not have
    plans = " ".join(str(r) for r in pq.read_table(release / "structures.parquet").to_pylist())
    assert "question" in plans and "filing" not in plans and "paper" not in plans


def test_nothing_outside_the_kinds_names_a_builtin_kind():
    """The flows and the layers above grounding ask the registry: no comparison with "edgar"/"arxiv"."""
    found = []
    for folder in (
        "flows",
        "tasks/synthesize",
        "tasks/generate",
        "tasks/llm",
        "tasks/instances",
        "tasks/release",
    ):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Compare):
                    names = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant)]
                    if {"edgar", "arxiv"} & set(names):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"branches on a built-in kind's name: {found}"
