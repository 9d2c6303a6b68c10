"""Security defaults: no code path evaluates input, paths stay in the input tree, bounded
decompression, and ``commscope query`` is read-only unless ``--write``.

Why: log text and trace files are attacker-controllable on a shared cluster (any user can
write a file into a job's log folder). These tests pin the defaults that make ingesting and
querying such files safe. Gzip and zstd bombs are covered by ``tests/corpus/test_corpus.py``;
this file adds xz and bz2.
"""

from __future__ import annotations

import ast
import bz2
import lzma
from pathlib import Path

import pytest

import commscope.parsers._io as pio
from commscope.pipeline.cli import main
from commscope.pipeline.ingest import STATUS_ERROR, STATUS_OK, discover, ingest_file, ingest_paths
from commscope.pipeline.store import Store

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("parsers", "pipeline", "reports")
SMALL = "nccl_debug/gfbench_2.20.5_2rank_normal_rank0_debugfile.txt"

# --------------------------------------------------------------------------- source scan

FORBIDDEN_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle"}
FORBIDDEN_BUILTINS = {"eval", "exec", "__import__"}
FORBIDDEN_ATTRS = {
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("yaml", "full_load"),
    ("os", "system"),
    ("os", "popen"),
    ("builtins", "eval"),
    ("builtins", "exec"),
}


def dangerous_uses(source: str, filename: str = "<src>") -> list[str]:
    """Every use of an evaluating/unpickling/shell construct in a module, as 'file:line what'.

    Bare ``eval``/``exec`` calls are flagged, not methods of that name (Polars'
    ``list.eval`` evaluates an expression, not text).
    """
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"{where} import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"{where} from {node.module} import")
        elif isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in FORBIDDEN_BUILTINS:
                found.append(f"{where} {fn.id}()")
            if (
                isinstance(fn, ast.Attribute)
                and isinstance(fn.value, ast.Name)
                and (fn.value.id, fn.attr) in FORBIDDEN_ATTRS
            ):
                found.append(f"{where} {fn.value.id}.{fn.attr}()")
            for kw in node.keywords:
                if kw.arg == "shell" and not (
                    isinstance(kw.value, ast.Constant) and kw.value.value is False
                ):
                    found.append(f"{where} shell=")
    return found


def test_scanner_finds_each_forbidden_construct() -> None:
    bad = (
        "import pickle\nfrom marshal import loads\nimport yaml, os, subprocess\n"
        "eval(x)\nexec(y)\nyaml.load(s)\nos.system(c)\n"
        "subprocess.run(c, shell=True)\nsubprocess.run(c, shell=flag)\n"
    )
    found = [u.split(" ", 1)[1] for u in dangerous_uses(bad)]
    assert sorted(found) == sorted(
        [
            "import pickle",
            "from marshal import",
            "eval()",
            "exec()",
            "yaml.load()",
            "os.system()",
            "shell=",
            "shell=",
        ]
    )
    ok = (
        "import yaml, subprocess\nyaml.safe_load(s)\npl.col('a').list.eval(e)\n"
        "subprocess.run(['ls'], shell=False)\nsubprocess.run(['ls'])\n"
    )
    assert dangerous_uses(ok) == []


PICKLE_ALLOWED: dict[str, frozenset[str]] = {
    # The restricted unpickler: a pickle.Unpickler subclass whose find_class admits plain
    # containers only; it may name the Unpickler class and the error types, never load/loads.
    "parsers/flight_recorder/_load.py": frozenset({"Unpickler", "UnpicklingError"}),
    # The generator writes Flight Recorder dumps; it reads back only the per-rank staging
    # files the same generation wrote under its own output folder (never an input).
    "synthetic/write_flight_recorder.py": frozenset({"dumps", "dump", "load", "HIGHEST_PROTOCOL"}),
}
"""Modules that may import ``pickle``, and the only ``pickle.<name>`` each may use."""


def pickle_attributes(source: str) -> set[str]:
    """Every ``pickle.<name>`` a module uses, and ``from pickle import`` names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "pickle"
        ):
            names.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "pickle":
            names.update(a.name for a in node.names)
    return names


def test_no_input_is_evaluated_unpickled_or_run_in_a_shell() -> None:
    files = [f for d in SCANNED for f in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 20  # the scan really walked the packages
    found = []
    for f in files:
        rel = str(f.relative_to(ROOT))
        for use in dangerous_uses(f.read_text(), rel):
            if rel in PICKLE_ALLOWED and use.endswith(" import pickle"):
                continue
            found.append(use)
    assert found == []


def test_pickle_is_used_only_by_the_restricted_unpickler_and_the_writer() -> None:
    for rel, allowed in PICKLE_ALLOWED.items():
        source = (ROOT / rel).read_text()
        used = pickle_attributes(source)
        assert used, f"{rel} no longer uses pickle: drop it from PICKLE_ALLOWED"
        assert used <= allowed, f"{rel} uses pickle.{sorted(used - allowed)}"
    loader = (ROOT / "parsers/flight_recorder/_load.py").read_text()
    assert "def find_class(" in loader  # the one door a pickle reaches code through
    assert pickle_attributes("import pickle\npickle.loads(b)\n") == {"loads"}


# --------------------------------------------------------------------------- input tree


def test_discover_does_not_follow_symlinks_out_of_the_input_tree(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere" / "secret.log"
    secret.parent.mkdir()
    secret.write_text("NCCL INFO secret\n")
    (tmp_path / "elsewhere" / "more.log").write_text("x\n")
    tree = tmp_path / "in"
    (tree / "sub").mkdir(parents=True)
    (tree / "real.log").write_text("a\n")
    (tree / "leak.log").symlink_to(secret)  # file link out of the tree
    (tree / "sub" / "outdir").symlink_to(secret.parent, target_is_directory=True)
    (tree / "sub" / "inside.log").symlink_to(tree / "real.log")  # link within the tree
    (tree / "sub" / "up.log").symlink_to(Path("..") / ".." / "elsewhere" / "secret.log")

    files, errors = discover([tree])
    resolved = {f.resolve() for f in files}
    assert resolved == {(tree / "real.log").resolve()}
    assert not any("elsewhere" in str(f.resolve()) for f in files)
    reported = {Path(e.path).name: e.message or "" for e in errors}
    assert "outside the input folder" in reported["leak.log"]
    assert "outside the input folder" in reported["up.log"]
    assert "not followed" in reported["outdir"]
    assert all(e.status == STATUS_ERROR for e in errors)
    # A link named explicitly on the command line is the user's choice: it is read.
    named, _ = discover([tree / "leak.log"])
    assert named == [tree / "leak.log"]


def test_ingest_of_a_tree_stores_nothing_from_outside(tmp_path: Path, shared_samples: Path) -> None:
    outside = tmp_path / "outside.log"
    outside.write_bytes((shared_samples / SMALL).read_bytes())
    tree = tmp_path / "in"
    tree.mkdir()
    (tree / "link.log").symlink_to(outside)
    store = Store.open(tmp_path / "store")
    results = ingest_paths(store, [tree], run_id="sec")
    assert [r.status for r in results] == [STATUS_ERROR]
    assert store.committed("sec").is_empty()


# --------------------------------------------------------------------------- bombs


@pytest.mark.parametrize("codec", ["xz", "bz2"])
def test_xz_and_bz2_bombs_hit_the_bound(
    codec: str, tmp_path: Path, shared_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decompression bound holds for every codec (lowered so the bomb stays small)."""
    monkeypatch.setattr(pio, "MAX_DECOMPRESSED_BYTES", 2 * 1024 * 1024)
    data = (shared_samples / SMALL).read_bytes() + b"\n" * (8 * 1024 * 1024)
    packed = lzma.compress(data) if codec == "xz" else bz2.compress(data, 9)
    assert len(packed) < 64 * 1024  # a real bomb: far smaller than what it expands to
    p = tmp_path / f"bomb.log.{codec}"
    p.write_bytes(packed)
    store = Store.open(tmp_path / "store")
    res = ingest_file(store, p, run_id="sec", fmt="nccl_debug")
    assert res.status == STATUS_ERROR and "bound" in (res.message or ""), res
    assert store.committed("sec").is_empty()


@pytest.mark.parametrize("keep", [4, 0.5, -3])
def test_truncated_zstd_is_an_error_not_an_empty_file(
    keep: float, tmp_path: Path, shared_samples: Path
) -> None:
    """A cut .zst must be a typed error (like a cut .gz), never a silently empty file."""
    import zstandard

    data = (shared_samples / SMALL).read_bytes()
    packed = zstandard.ZstdCompressor().compress(data)
    cut = int(keep) if keep >= 1 or keep < 0 else int(len(packed) * keep)
    p = tmp_path / "cut.log.zst"
    p.write_bytes(packed[:cut])
    store = Store.open(tmp_path / "store")
    res = ingest_file(store, p, run_id="sec", fmt="nccl_debug")
    assert res.status == STATUS_ERROR, res
    assert store.committed("sec").is_empty()


# --------------------------------------------------------------------------- query


@pytest.fixture
def qstore(tmp_path: Path, shared_samples: Path) -> Path:
    root = tmp_path / "store"
    res = ingest_file(Store.open(root), shared_samples / SMALL, run_id="q")
    assert res.status == STATUS_OK, res
    return root


def _query(capsys: pytest.CaptureFixture[str], store: Path, sql: str, *flags: str):
    rc = main(["query", sql, "--store", str(store), "--format", "csv", *flags])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_query_is_read_only_by_default(
    qstore: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = qstore / "catalog.duckdb"
    rc, out, _ = _query(capsys, qstore, "SELECT count(*) AS n FROM comm_ops")
    assert rc == 0 and int(out.splitlines()[1]) > 0
    before = catalog.read_bytes()
    target = tmp_path / "copied.csv"
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    cases = {
        "CREATE TABLE mine AS SELECT 1 AS a": "CREATE",
        "CREATE VIEW mine AS SELECT 1 AS a": "CREATE",
        f"COPY (SELECT * FROM comm_ops) TO '{target}'": "COPY",
        "INSERT INTO comm_ops SELECT * FROM comm_ops": "INSERT",
        f"ATTACH '{tmp_path / 'other.duckdb'}' AS other": "ATTACH",
        "SET enable_external_access = true": "SET",
        "SELECT 1; DROP VIEW comm_ops": "DROP",
    }
    for sql, kind in cases.items():
        rc, out, err = _query(capsys, qstore, sql)
        assert rc == 1, sql
        assert f"{kind} statements are not allowed in a read-only query" in err, (sql, err)
        assert "--write" in err and "Traceback" not in err
    # Reading a file outside the store is refused too (a query cannot exfiltrate files).
    rc, _, err = _query(capsys, qstore, f"SELECT * FROM read_csv('{outside}')")
    assert rc == 1 and "outside the store" in err, err
    assert not target.exists()
    assert not (tmp_path / "other.duckdb").exists()
    assert catalog.read_bytes() == before
    rc, out, _ = _query(capsys, qstore, "SELECT count(*) AS n FROM comm_ops")
    assert rc == 0


def test_query_write_creates_tables_and_files(
    qstore: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "copied.csv"
    rc, _, err = _query(capsys, qstore, "CREATE TABLE mine AS SELECT 1 AS a", "--write")
    assert rc == 0, err
    rc, _, err = _query(capsys, qstore, "INSERT INTO mine VALUES (2), (3)", "--write")
    assert rc == 0, err
    rc, _, err = _query(
        capsys, qstore, f"COPY (SELECT op FROM comm_ops) TO '{target}' (HEADER)", "--write"
    )
    assert rc == 0, err
    # Independent check: the CSV holds the store's rows (count from the view vs file lines).
    rc, out, _ = _query(capsys, qstore, "SELECT count(*) AS n FROM comm_ops")
    assert len(target.read_text().splitlines()) == int(out.splitlines()[1]) + 1
    # What --write created is readable by a later read-only query.
    rc, out, _ = _query(capsys, qstore, "SELECT sum(a) AS s FROM mine")
    assert rc == 0 and out.splitlines()[1] == "6"
