"""The blind evaluation kit (tasks/release/evalkit.py) built from the demo release: what it holds, that
no target report text can be recovered from it, that its files match its MANIFEST, and how it refuses
bad output folders."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemas.release import GROUNDING_DOCUMENTS_SCHEMA, INSTANCES_SCHEMA, ReleaseManifest
from tasks.errors import FrameInputError
from tasks.release.evalkit import (
    DOCUMENT_COLUMNS,
    INSTANCE_COLUMNS,
    export_eval_kit,
    report_file_name,
    verify_eval_kit,
)
from tasks.release.write import write_release

MIN_WORDS = 12
Y_COLUMNS = {"target_markdown", "target_report_id"}  # the columns of instances that are, or name, Y


def norm(text: str) -> str:
    return " ".join(text.split())


def paragraphs(markdown: str) -> list[str]:
    return [norm(p) for p in markdown.split("\n\n") if len(p.split()) >= MIN_WORDS]


def kit_text(folder: Path) -> str:
    """Every file of the kit, whitespace-normalised, JSON strings decoded (so JSON escaping hides nothing)."""
    parts = []
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        text = p.read_text(encoding="utf-8")
        parts.append(norm(text))
        if p.suffix in (".json", ".jsonl"):
            for line in text.splitlines() if p.suffix == ".jsonl" else [text]:
                parts.append(norm(json.dumps(json.loads(line), ensure_ascii=False)))
                parts.extend(norm(s) for s in _strings(json.loads(line)))
    return "\n".join(parts)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def leaked(rows: list[dict], grounding: dict[tuple[str, str], str], text: str) -> list[str]:
    """Sentences (>= 12 words) of the instances' Y that are in neither their S nor their G but are in
    `text`."""
    out = []
    for r in rows:
        g = [grounding[(r["grounding_set_id"], d)] for d in r["grounding_doc_ids"]]
        seen = voice_free(norm("\n".join([r["sample_markdown"], *g])))
        # sentence by sentence: gold may drop a sentence of G's paragraph that it already holds elsewhere
        sentences = [x for p in paragraphs(r["target_markdown"]) for x in re.split(r"(?<=[.!?])\s+", p)]
        out += [
            x for x in sentences if len(x.split()) >= MIN_WORDS and voice_free(x) not in seen and x in text
        ]
    return out


# Gold prose is the filing's text in the third person ("our liability" -> "the company's liability", "we
# believe" -> "the company believes"): a paragraph that is G's but for its grammatical person is G's, not
# something the kit leaks
_PERSON = re.compile(r"\b(?:the company's|the company|company's|ours|our|we|us|its|it)\b", re.IGNORECASE)


def voice_free(text: str) -> str:
    """`text` with its person words blanked and every word's final "s" dropped ("we believe" and "the
    company believes" read alike)."""
    text = _PERSON.sub("\u00b7", text.lower())
    text = re.sub(
        r"\b(?:has|have)\b",
        "have",
        re.sub(r"\b(?:is|are)\b", "are", re.sub(r"\b(?:was|were)\b", "were", text)),
    )
    return re.sub(r"(\w)s\b", r"\1", re.sub(r"\bdoes\b", "do", text))


@pytest.fixture(scope="module")
def demo(demo_release):
    instances = {r["instance_id"]: r for r in pq.read_table(demo_release / "instances.parquet").to_pylist()}
    docs = pq.read_table(demo_release / "grounding_documents.parquet").to_pylist()
    grounding = {(d["grounding_set_id"], d["doc_id"]): d["markdown"] for d in docs}
    return instances, grounding


@pytest.fixture(scope="module")
def kit(demo_release, tmp_path_factory):
    out = tmp_path_factory.mktemp("evalkit") / "kit"
    summary = export_eval_kit(demo_release, out)
    return out, summary


def test_every_release_column_is_decided():
    assert set(INSTANCE_COLUMNS) == set(INSTANCES_SCHEMA.names)
    assert set(DOCUMENT_COLUMNS) == set(GROUNDING_DOCUMENTS_SCHEMA.names)
    assert not any(INSTANCE_COLUMNS[c] for c in Y_COLUMNS)


def test_kit_layout_and_manifest(kit, demo, demo_release):
    out, summary = kit
    instances, _ = demo
    rows = [json.loads(ln) for ln in (out / "instances.jsonl").read_text(encoding="utf-8").splitlines()]
    assert summary["instances"] == len(rows) > 0
    assert summary["release"] == "demo/0.1.0"
    for row in rows:
        src = instances[row["instance_id"]]
        assert not Y_COLUMNS & set(row)
        assert set(row) == {c for c, keep in INSTANCE_COLUMNS.items() if keep} | {
            "sample_file",
            "grounding_files",
            "report_file",
        }
        assert row["sample_markdown"] == src["sample_markdown"]
        assert (out / row["sample_file"]).read_text(encoding="utf-8") == src["sample_markdown"]
        assert row["report_file"] == f"reports/{report_file_name(row['instance_id'])}.md"
        assert row["sample_file"] == f"samples/{report_file_name(row['instance_id'])}.md"
        assert row["grounding_doc_ids"] == list(src["grounding_doc_ids"])
        for doc, rel in zip(row["grounding_doc_ids"], row["grounding_files"], strict=True):
            assert rel == f"grounding/{row['grounding_set_id']}/{doc}.md" and (out / rel).is_file()
    docs = [json.loads(ln) for ln in (out / "documents.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(docs) == summary["documents"]
    assert all("markdown" not in d and (out / d["file"]).is_file() for d in docs)

    manifest = json.loads((out / "MANIFEST.json").read_text(encoding="utf-8"))
    assert (manifest["release"]["name"], manifest["release"]["version"]) == ("demo", "0.1.0")
    assert verify_eval_kit(out) == []
    assert summary["files"] == len(manifest["files"]) + 1
    readme = (out / "README.md").read_text(encoding="utf-8")
    for needed in ("instance_id", "markdown", "report_file", "[systems.mine]", 'kind = "submission"'):
        assert needed in readme
    assert "frame score --release <release> --config eval.toml" in readme
    # nothing names a path of this machine
    text = kit_text(out)
    for local in (str(demo_release), str(demo_release.parents[3]), str(out.parent), os.path.expanduser("~")):
        assert local not in text
    assert not [p for p in out.parent.iterdir() if p.name != "kit"]  # no staging folder left behind


def test_manifest_detects_changed_and_extra_files(kit, tmp_path):
    out, _ = kit

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    sample = next((copy / "samples").iterdir())
    sample.write_text(sample.read_text(encoding="utf-8") + "x", encoding="utf-8")
    (copy / "extra.md").write_text("x", encoding="utf-8")
    problems = verify_eval_kit(copy)
    assert any(sample.name in p and "sha256" in p for p in problems)
    assert any("extra.md" in p and "not listed" in p for p in problems)


def test_no_target_text_can_be_recovered(kit, demo):
    out, summary = kit
    instances, grounding = demo
    rows = [json.loads(ln) for ln in (out / "instances.jsonl").read_text(encoding="utf-8").splitlines()]
    text = kit_text(out)
    exported = [instances[r["instance_id"]] for r in rows]
    assert sum(len(paragraphs(r["target_markdown"])) for r in exported) > 50  # the check has material
    assert leaked(exported, grounding, text) == []


def test_chained_instances_are_withheld_and_exportable_apart(kit, demo, demo_release, tmp_path):
    out, summary = kit
    instances, grounding = demo
    withheld = summary["withheld"]
    assert withheld  # the demo has chains t1->t2, t2->t3
    lines = (out / "instances.jsonl").read_text(encoding="utf-8").splitlines()
    kept = {json.loads(ln)["instance_id"] for ln in lines}
    assert kept | set(withheld) == set(instances) and not kept & set(withheld)
    samples = {instances[i]["sample_report_id"] for i in kept}
    assert all(instances[w]["target_report_id"] in samples for w in withheld)
    # the withheld instances' Y is in this kit (as a later S): exporting them here would leak
    assert leaked([instances[w] for w in withheld], grounding, kit_text(out))

    # on their own (for other participants) they are blind again
    summary2 = export_eval_kit(demo_release, tmp_path / "round2", instances=withheld)
    assert summary2["withheld"] == [] and summary2["instances"] == len(withheld)
    lines2 = (tmp_path / "round2" / "instances.jsonl").read_text(encoding="utf-8").splitlines()
    rows2 = [json.loads(ln) for ln in lines2]
    assert (
        leaked([instances[r["instance_id"]] for r in rows2], grounding, kit_text(tmp_path / "round2")) == []
    )


def test_output_folder_must_be_new_or_empty(demo_release, demo, tmp_path):
    instances, _ = demo
    one = [sorted(instances)[-1]]
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(FrameInputError, match="not empty"):
        export_eval_kit(demo_release, full, instances=one)
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    with pytest.raises(FrameInputError, match="not a folder"):
        export_eval_kit(demo_release, afile, instances=one)
    with pytest.raises(FrameInputError, match="no-such-instance"):
        export_eval_kit(demo_release, tmp_path / "new", instances=["no-such-instance"])
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export_eval_kit(demo_release, empty, instances=one)["instances"] == 1
    assert verify_eval_kit(empty) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "empty", "full"]


def test_failure_midway_leaves_nothing(demo_release, tmp_path):
    """A grounding document whose id cannot be a file name stops the export after files were staged:
    no kit and no staging folder are left."""
    tables = {n: pq.read_table(demo_release / f"{n}.parquet").to_pylist() for n in ("instances", "reports")}
    tables["grounding_documents"] = pq.read_table(demo_release / "grounding_documents.parquet").to_pylist()
    inst = tables["instances"][-1]
    doc = next(d for d in tables["grounding_documents"] if d["grounding_set_id"] == inst["grounding_set_id"])
    tables["grounding_documents"].append(dict(doc, doc_id="../escape"))
    inst["grounding_doc_ids"] = [*inst["grounding_doc_ids"], "../escape"]
    m = ReleaseManifest.model_validate_json((demo_release / "manifest.json").read_bytes())
    fields = {"config_sha256": m.config_sha256, "code_version": m.code_version, "created_at": m.created_at}
    release = write_release(tmp_path / "releases", "bad", "0.1.0", tables, fields, "card\n")
    out = tmp_path / "out" / "kit"
    with pytest.raises(FrameInputError, match="escape"):
        export_eval_kit(release, out)
    assert list((tmp_path / "out").iterdir()) == []
    assert not (tmp_path / "escape.md").exists() and not (tmp_path / "out" / "escape.md").exists()
