"""Ids, tickers and paths from configs, manifests and release names cannot leave the data folder.

Every config field that ends up in a path (domain name, ticker, cik, topic, window label) is refused by
`load_config` with one `ConfigError` line naming the file and the field; the same configs make the
`frame` CLI exit 2 with one stderr line. Manifest rows pointing outside the mirror and release
names/versions that are not one safe path segment are refused, and a real mirror fetch writes only
inside the configured data folder.

Already covered elsewhere (not repeated here): `tests/test_config.py` (one `../escape` name, `AA/PL`
ticker), `tests/test_fetch_mirror.py::test_manifest_path_escape_rejected` (EDGAR rows, files that do
not exist) and `::test_store_rejects_path_escape`, `tests/test_release.py` (`../escape` release name).
"""

from __future__ import annotations

import csv
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.config import load_config
from tasks.errors import ConfigError, FrameInputError
from tasks.fetch.mirror import mirror_arxiv, mirror_edgar
from tasks.release.write import _check_slug, write_release
from tasks.sources import fetch_snapshot
from tests.conftest import CORPUS

FRAME = str(Path(sys.executable).with_name("frame"))

# Values that must never become a path component. TOML cannot hold lone surrogates, so those are
# covered by the "not valid TOML" case below.
HOSTILE = {
    "dotdot-slash": "../x",
    "dotdot": "..",
    "dotdot-inside": "a/../../b",
    "trailing-dotdot": "abc..",
    "absolute": "/etc",
    "absolute-passwd": "/etc/passwd",
    "backslash": "a\\b",
    "backslash-dotdot": "..\\..\\x",
    "trailing-newline": "abc\n",
    "crlf": "abc\r\n",
    "nul": "a\x00b",
    "trailing-nul": "abc\x00",
    "fullwidth-dots-slash": "\uff0e\uff0e\uff0fetc",
    "one-dot-leader": "\u2024\u2024/x",
    "division-slash": "a\u2215b",
    "rtl-override": "ab\u202ecd",
    "combining-mark": "e\u0301x",
    "zero-width-space": "ab\u200bcd",
    "line-separator": "ab\u2028cd",
    "fullwidth-letters": "\uff21\uff21\uff30\uff2c",
    "space": "a b",
    "empty": "",
    "hidden": ".hidden",
    "very-long": "A" * 300,
}
CIK_HOSTILE = {
    "dotdot": "../1",
    "absolute": "/etc",
    "trailing-newline": "320193\n",
    "nul": "320193\x00",
    "fullwidth-digits": "\uff13\uff12\uff10",
    "arabic-digits": "\u0663\u0662\u0660",
    "too-long": "1" * 11,
    "very-long": "9" * 5000,
    "slash": "32/0193",
}

# (field, TOML key of the template, the field path ConfigError must name)
FIELDS = {
    "edgar-name": ("edgar_name", "domains[0].name"),
    "ticker": ("ticker", "domains[0].ticker"),
    "arxiv-name": ("arxiv_name", "domains[1].name"),
    "topic": ("topic", "domains[1].topic"),
    "window-label": ("label", "domains[1].windows[0].label"),
}

DEFAULTS = {
    "data_dir": "data",
    "mirror": str(CORPUS),
    "edgar_name": "AAPL-10-Q",
    "ticker": "AAPL",
    "cik": "0000320193",
    "arxiv_name": "llm",
    "topic": "large-language-models",
    "label": "W1",
}

TEMPLATE = """\
[build]
data_dir = {data_dir}

[source]
mode = "mirror"
mirror = {mirror}

[[domains]]
kind = "edgar"
name = {edgar_name}
category = "financial_quarterly"
ticker = {ticker}
cik = {cik}
form = "10-Q"
periods = ["2025-03-29"]

[[domains]]
kind = "arxiv"
name = {arxiv_name}
category = "academic_simple"
topic = {topic}
query = "cat:cs.CL"
papers_per_window = 1
windows = [{{ label = {label}, start = "2017-01-01", end = "2017-12-31" }}]
"""


def toml_str(value: str) -> str:
    """A TOML basic string holding exactly `value` (everything outside printable ASCII escaped)."""
    out = []
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif " " <= ch <= "~":
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(f"\\U{ord(ch):08X}")
    return '"' + "".join(out) + '"'


def write_config(folder: Path, name: str = "c.toml", **values: str) -> Path:
    fields = {k: toml_str(v) for k, v in {**DEFAULTS, **values}.items()}
    path = folder / name
    path.write_text(TEMPLATE.format(**fields), encoding="utf-8")
    return path


def assert_one_line(msg: str) -> None:
    assert msg and len(msg.splitlines()) == 1 and "\n" not in msg and "\r" not in msg, repr(msg)


def test_template_is_valid(tmp_path):
    """The good template loads; otherwise every refusal below would prove nothing."""
    cfg = load_config(write_config(tmp_path))
    assert [d.name for d in cfg.domains] == ["AAPL-10-Q", "llm"]
    assert cfg.build.data_dir == (tmp_path / "data").resolve()


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_id_is_refused(tmp_path, field, case):
    key, field_path = FIELDS[field]
    value = HOSTILE[case]
    path = write_config(tmp_path, **{key: value})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert_one_line(msg)
    assert msg.startswith(f"{path}: field {field_path}: "), msg
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("case", sorted(CIK_HOSTILE))
def test_hostile_cik_is_refused(tmp_path, case):
    path = write_config(tmp_path, cik=CIK_HOSTILE[case])
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert_one_line(msg)
    assert msg.startswith(f"{path}: field domains[0].cik: "), msg


def test_surrogate_in_config_is_not_valid_toml(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        write_config(tmp_path).read_text().replace('name = "llm"', 'name = "a\\uD800b"'), encoding="utf-8"
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert_one_line(str(err.value))
    assert str(err.value).startswith(f"{path}: not valid TOML")
    # the same surrogate as raw bytes (invalid UTF-8) in the file
    path.write_bytes(write_config(tmp_path).read_bytes().replace(b'"llm"', b'"a\xed\xa0\x80b"'))
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)


@pytest.mark.parametrize("key", ["data_dir", "mirror"])
def test_nul_in_a_configured_folder_is_a_config_error(tmp_path, key):
    path = write_config(tmp_path, **{key: "da\x00ta"})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert_one_line(str(err.value))


CLI_CASES = {
    "name-dotdot": {"edgar_name": "../../etc"},
    "ticker-absolute": {"ticker": "/etc"},
    "label-newline": {"label": "W1\n"},
    "topic-rtl": {"topic": "gw\u202e..\u202c"},
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_refuses_hostile_config_with_exit_2(tmp_path, case):
    path = write_config(tmp_path, **CLI_CASES[case])
    env = {**os.environ, "COLUMNS": "200", "PREFECT_HOME": str(tmp_path / "prefect")}
    res = subprocess.run(
        [FRAME, "ground-domains", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"frame: error: {path}: field domains["), lines[0]
    assert "Traceback" not in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]  # nothing created


# ---------------------------------------------------------------- mirror manifests


def outside_target(tmp_path: Path) -> tuple[Path, str]:
    """A real file outside the mirror whose sha256 the hostile rows carry, so only the path check
    stands between the manifest and the file."""
    target = tmp_path / "outside.htm"
    target.write_bytes(b"<html><body>secret outside the mirror</body></html>")
    return target, hashlib.sha256(target.read_bytes()).hexdigest()


def hostile_paths(target: Path) -> dict[str, str]:
    # manifests live at <tmp>/mirror/<source>/MANIFEST.csv: two levels below <tmp>
    return {
        "relative": "../../outside.htm",
        "dot-then-dotdot": "./../../outside.htm",
        "inside-then-up": "AAPL/../../../outside.htm",
        "double-slash": "AAPL//../../../outside.htm",
        "absolute": str(target),
        "absolute-dotdot": f"{target.parent}/mirror/../outside.htm",
        "backslashes": "..\\..\\outside.htm",
        "nul": "../../outside.htm\x00.html",
        "empty": "",
        "trailing-slash": "../../",
    }


def write_manifest(path: Path, header: list[str], rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.parametrize(
    "case",
    ["relative", "dot-then-dotdot", "inside-then-up", "double-slash", "absolute"]
    + ["absolute-dotdot", "backslashes", "nul", "empty", "trailing-slash"],
)
def test_edgar_manifest_row_outside_the_mirror_is_refused(tmp_path, case):
    target, sha = outside_target(tmp_path)
    rel = hostile_paths(target)[case]
    header = ["path", "ticker", "cik", "company", "form", "period_end", "sha256", "bytes"]
    row = dict(path=rel, ticker="AAPL", cik="320193", company="Apple", form="10-Q")
    row.update(period_end="2025-03-29", sha256=sha, bytes=str(target.stat().st_size))
    write_manifest(tmp_path / "mirror" / "edgar" / "MANIFEST.csv", header, [row])
    cfg = load_config(write_config(tmp_path, mirror=str(tmp_path / "mirror")))
    with pytest.raises(FrameInputError) as err:
        mirror_edgar(cfg, cfg.domains[0], "2025-03-29")
    msg = str(err.value)
    assert_one_line(msg.replace("\x00", ""))
    assert "unsafe path" in msg and "MANIFEST.csv:2" in msg
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("case", ["relative", "absolute", "inside-then-up", "backslashes"])
def test_arxiv_manifest_row_outside_the_mirror_is_refused(tmp_path, case):
    target, sha = outside_target(tmp_path)
    header = ["path", "topic", "arxiv_id", "title", "first_version_date", "sha256"]
    row = dict(path=hostile_paths(target)[case], topic="large-language-models", arxiv_id="1706.03762")
    row.update(title="t", first_version_date="2017-06-12", sha256=sha)
    write_manifest(tmp_path / "mirror" / "arxiv" / "MANIFEST.csv", header, [row])
    cfg = load_config(write_config(tmp_path, mirror=str(tmp_path / "mirror")))
    with pytest.raises(FrameInputError, match=r"MANIFEST\.csv:2 .*unsafe path"):
        mirror_arxiv(cfg, cfg.domains[1], "W1")
    assert not (tmp_path / "data").exists()


def test_unreadable_manifest_is_an_input_error(tmp_path):
    """A manifest that is not UTF-8 is bad input (one line naming it), not a UnicodeDecodeError."""
    manifest = tmp_path / "mirror" / "edgar" / "MANIFEST.csv"
    manifest.parent.mkdir(parents=True)
    manifest.write_bytes(b"path,ticker,cik,form,period_end,sha256\nAAPL/\xff.htm,AAPL,1,10-Q,2025-03-29,0\n")
    cfg = load_config(write_config(tmp_path, mirror=str(tmp_path / "mirror")))
    with pytest.raises(FrameInputError) as err:
        mirror_edgar(cfg, cfg.domains[0], "2025-03-29")
    assert_one_line(str(err.value))
    assert str(err.value).startswith(f"{manifest}: ")


@pytest.mark.skipif(not (CORPUS / "edgar" / "MANIFEST.csv").is_file(), reason="shared corpus not found")
def test_real_mirror_fetch_writes_only_inside_the_data_folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    cfg = load_config(write_config(work))
    data = cfg.build.data_dir
    assert data == (work / "data").resolve()
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    raws = fetch_snapshot(cfg, cfg.domains[0], "2025-03-29") + fetch_snapshot(cfg, cfg.domains[1], "W1")
    assert [r.source for r in raws] == ["edgar", "arxiv"]
    assert raws[1].arxiv_id == "1706.03762"
    written = [p for p in data.rglob("*") if p.is_file() or p.is_symlink()]
    assert len(written) == 4  # two blobs and their two provenance records
    for p in written:
        assert not p.is_symlink()
        assert p.resolve().is_relative_to(data), p
    for raw in raws:
        assert not Path(raw.path).is_absolute() and not Path(raw.location).is_absolute()  # portable
        blob = data / raw.path
        assert blob.resolve().is_relative_to(data / "raw" / "sha256")
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == raw.sha256
        assert (blob.stat().st_mode & 0o777) == 0o444
    records = sorted(p.relative_to(data).parts[:5] for p in written if p.suffix == ".json")
    assert records == [
        ("raw", "provenance", "arxiv", "llm", "W1"),
        ("raw", "provenance", "edgar", "AAPL-10-Q", "2025-03-29"),
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before  # nothing beside the work dir
    assert sorted(p.name for p in work.iterdir()) == ["c.toml", "data"]


# ---------------------------------------------------------------- release names


BAD_RELEASE_NAMES = [
    "../x",
    "..",
    "a/../../b",
    "/etc",
    "a/b",
    "a\\b",
    "demo\n",
    "demo\x00",
    "\uff44\uff45\uff4d\uff4f",
    "de\u202emo",
    ".hidden",
    "x" * 65,
    "",
]
BAD_VERSIONS = ["../1.0.0", "1.0.0/../..", "/1.0.0", "1.0.0\n", "1.0.0\x00", "\uff11.0.0", "1.0.0/x", ""]


@pytest.mark.parametrize("name", BAD_RELEASE_NAMES)
def test_release_name_must_be_one_safe_segment(tmp_path, name):
    with pytest.raises(FrameInputError) as err:
        _check_slug(name, "1.0.0")
    assert str(err.value).startswith("release name: ")
    assert_one_line(str(err.value))
    with pytest.raises(FrameInputError):
        write_release(tmp_path / "releases", name, "1.0.0", {}, {}, "")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("version", BAD_VERSIONS)
def test_release_version_must_be_semver(tmp_path, version):
    with pytest.raises(FrameInputError) as err:
        _check_slug("demo", version)
    assert str(err.value).startswith("release version: ")
    assert_one_line(str(err.value))
    with pytest.raises(FrameInputError):
        write_release(tmp_path / "releases", "demo", version, {}, {}, "")
    assert list(tmp_path.iterdir()) == []


def test_good_release_slugs_pass():
    for name, version in [("demo", "0.1.0"), ("frame-bench_2.x", "10.20.30-rc.1")]:
        _check_slug(name, version)


@pytest.mark.parametrize("bad", ["abc\n", "../x", "a/b", "", ".hidden", "x\x00y", "ａｂｃ"])
def test_provenance_path_components_are_checked_whole(bad):
    """The raw store's own guard (defence in depth behind the config's): a trailing newline, a
    separator, NUL or non-ASCII never becomes part of a provenance path."""
    from tasks.errors import FrameInputError
    from tasks.fetch.store import blob_path, safe_component

    with pytest.raises(FrameInputError, match="unsafe path component"):
        safe_component(bad, "domain")
    with pytest.raises(FrameInputError, match="sha256"):
        blob_path("/data", "0" * 64 + "\n")
