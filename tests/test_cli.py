"""The ``dnnframe`` command line, run as real subprocesses against real SQLite files."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from tiers import skip_optional

from dnnframe.store import open_store

REPO = Path(__file__).resolve().parents[1]

TINY = {
    "name": "cli-tiny",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2]}, "width": 8},
    "training": {"max_epochs": 2, "batch_size": 32},
    "search": {"seeds": 2},
}


def cli(
    *args: str, cwd: Path, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``python -m dnnframe.cli ARGS`` in a fresh process."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    full_env = {**os.environ, "PYTHONPATH": path}
    full_env.pop("DNNFRAME_STORE_URL", None)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dnnframe.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write_spec(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One real sweep (4 tiny trials on 2 workers) shared by the read-only tests. Each trial
    waits until both workers have started one (a worker slow to start would otherwise find
    the other done with the whole sweep), then trains with the engine."""
    root = tmp_path_factory.mktemp("cli")
    spec = write_spec(root / "tiny.yaml", TINY)
    url = f"sqlite:///{root / 'results.db'}"
    (root / "meet").mkdir()
    proc = cli(
        "run",
        str(spec),
        "--store",
        url,
        "--workers",
        "2",
        "--json",
        cwd=root,
        env={
            "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:meet_then_train",
            "DNNFRAME_HOOK_MEET_DIR": str(root / "meet"),
        },
    )
    assert proc.returncode == 0, proc.stderr
    return {
        "root": root,
        "spec": spec,
        "url": url,
        "summary": json.loads(proc.stdout),
        "stderr": proc.stderr,
    }


def test_run_trains_every_trial_and_prints_a_summary(swept):
    s = swept["summary"]
    assert s["counts"]["COMPLETE"] == 4 and s["n_trials"] == 4 and s["trials_run_now"] == 4
    assert s["status"] == "COMPLETE" and s["store"] == swept["url"]
    assert s["best"]["test_accuracy"] == max(c["max"] for c in s["best_configs"])
    assert [c["hidden_layers"] for c in s["best_configs"]] and s["varied"] == ["hidden_layers"]
    assert "Best configurations" in swept["stderr"] and swept["url"] in swept["stderr"]
    # stderr is a pipe, not a terminal: plain progress lines, the last one the whole sweep
    progress = [
        line
        for line in swept["stderr"].splitlines()
        if line.startswith("cli-tiny: ") and "trials finished" in line
    ]
    assert progress, swept["stderr"]
    assert re.fullmatch(
        r"cli-tiny: 4/4 trials finished, 0 running, 0 failed, "
        r"elapsed \d+:\d\d:\d\d, ETA 0:00:00, best test_accuracy \d\.\d{4}",
        progress[-1],
    ), progress
    with open_store(swept["url"]) as store:
        trials = store.list_trials(s["experiment_id"])
    assert len({t.worker for t in trials}) == 2, "two workers should share the sweep"
    assert all(len(t.metrics) == 2 for t in trials)


def test_printed_commands_work_from_another_directory(swept, tmp_path):
    """The summary's status and report commands name the store, so they read this sweep
    from anywhere, not ./dnnframe.db."""
    commands = [
        line.strip() for line in swept["stderr"].splitlines() if line.startswith("  dnnframe ")
    ]
    exp_id = swept["summary"]["experiment_id"]
    assert commands == [
        f"dnnframe status {exp_id} --store {swept['url']}",
        f"dnnframe report {exp_id} --store {swept['url']}",
    ]
    for command in commands:
        proc = cli(*shlex.split(command)[1:], cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / f"report-{exp_id}.html").exists()
    assert not (tmp_path / "dnnframe.db").exists()


def test_printed_commands_are_shell_quoted(tmp_path):
    from dnnframe.spec import parse_spec
    from dnnframe.submit import submit_experiment

    where = tmp_path / "my results"
    where.mkdir()
    url = f"sqlite:///{where / 'a b.db'}"
    with open_store(url) as store:
        exp_id = submit_experiment(parse_spec(TINY), store).experiment.id
    proc = cli("status", "--store", url, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    printed = [line.strip() for line in proc.stdout.splitlines() if "dnnframe status" in line]
    assert printed == [f"dnnframe status {exp_id} --store 'sqlite:///{where}/a b.db'"]
    assert shlex.split(printed[0])[-1] == url


def test_printed_commands_never_show_a_password_from_the_environment(monkeypatch, capsys):
    """A store URL with a password that came from $DNNFRAME_STORE_URL is printed as the
    variable, so pasting the command in the same shell still works."""
    from dnnframe.cli import main
    from dnnframe.spec import parse_spec
    from dnnframe.submit import submit_experiment

    url = "mongomock://alice:s3cret@hints-test/dnnframe"  # an in-process MongoDB
    with open_store(url) as store:
        exp_id = submit_experiment(parse_spec(TINY), store).experiment.id
    monkeypatch.setenv("DNNFRAME_STORE_URL", url)
    with pytest.raises(SystemExit) as exc:
        main(["status"])
    assert exc.value.code in (0, None)
    out = capsys.readouterr().out
    assert "s3cret" not in out
    assert "results in mongomock://alice:***@hints-test/dnnframe:" in out
    assert f'dnnframe status {exp_id} --store "$DNNFRAME_STORE_URL"' in out
    # nor does the JSON summary, which scripts keep and log
    with pytest.raises(SystemExit) as exc:
        main(["status", exp_id, "--json"])
    assert exc.value.code in (0, None)
    out = capsys.readouterr().out
    assert "s3cret" not in out
    assert json.loads(out)["store"] == "mongomock://alice:***@hints-test/dnnframe"


def test_rerunning_the_same_spec_retrains_nothing(swept):
    with open_store(swept["url"]) as store:
        before = {t.id: t.started_at for t in store.list_trials(swept["summary"]["experiment_id"])}
    proc = cli(
        "run", str(swept["spec"]), "--store", swept["url"], "--json", "--quiet", cwd=swept["root"]
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["trials_run_now"] == 0 and proc.stderr == ""
    with open_store(swept["url"]) as store:
        after = {t.id: t.started_at for t in store.list_trials(swept["summary"]["experiment_id"])}
    assert after == before


def test_a_rerun_with_nothing_to_run_starts_no_worker(swept, monkeypatch, capsys):
    """Nothing is QUEUED: the run decides so before any worker process or executor exists."""
    import multiprocessing

    from dnnframe.cli import main
    from dnnframe.executors import LocalExecutor

    def refuse(*args, **kwargs):
        raise AssertionError("an executor was created for a sweep with nothing to run")

    monkeypatch.setattr(LocalExecutor, "__init__", refuse)
    with pytest.raises(SystemExit) as exc:
        main(["run", str(swept["spec"]), "--store", swept["url"], "-w", "2"])
    assert exc.value.code in (0, None)
    assert multiprocessing.active_children() == []
    err = capsys.readouterr().err
    assert "4 trials, none left to run (all finished before)" in err
    assert "trials finished" not in err, "no progress display for an empty run"


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_export_writes_every_trial(swept, fmt):
    out = swept["root"] / f"export.{fmt}"
    proc = cli(
        "export",
        swept["summary"]["experiment_id"],
        "--store",
        swept["url"],
        "--format",
        fmt,
        "-o",
        str(out),
        cwd=swept["root"],
    )
    assert proc.returncode == 0, proc.stderr
    if fmt == "csv":
        rows = list(csv.DictReader(out.open()))
        assert sorted(int(r["config.model.hidden_layers"]) for r in rows) == [1, 1, 2, 2]
        assert all(
            r["state"] == "COMPLETE" and 0 <= float(r["result.metrics.test_accuracy"]) <= 1
            for r in rows
        )
    else:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == 4 and all(len(r["result"]["history"]) == 2 for r in rows)
    # to stdout, by experiment name
    proc = cli("export", "cli-tiny", "--store", swept["url"], "--format", fmt, cwd=swept["root"])
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and len(lines) == (5 if fmt == "csv" else 4)


def test_report_is_self_contained_html(swept):
    out = swept["root"] / "report.html"
    proc = cli(
        "report",
        swept["summary"]["experiment_id"],
        "--store",
        swept["url"],
        "-o",
        str(out),
        cwd=swept["root"],
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "plotly.js v" in text and len(text) > 1_000_000  # the library itself, inlined
    assert not re.search(r"<script[^>]*\bsrc=", text), "no external scripts"
    assert not re.search(r"<link[^>]*href=[\"']?https?:", text), "no external stylesheets"
    for title in (
        "Hidden layers vs test_accuracy",
        "Hidden layers vs training time",
        "Learning curves",
    ):
        assert title in text
    assert swept["summary"]["best"]["trial_id"] in text


def test_status_and_ls(swept):
    exp_id = swept["summary"]["experiment_id"]
    proc = cli("status", "--store", swept["url"], "--json", cwd=swept["root"])  # latest experiment
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status["experiment_id"] == exp_id and status["counts"]["COMPLETE"] == 4
    proc = cli("status", exp_id[:10], cwd=swept["root"], env={"DNNFRAME_STORE_URL": swept["url"]})
    assert proc.returncode == 0 and "COMPLETE 4" in proc.stdout
    proc = cli("ls", "--store", swept["url"], "--json", cwd=swept["root"])
    assert [e["id"] for e in json.loads(proc.stdout)] == [exp_id]
    proc = cli("status", "nope", "--store", swept["url"], cwd=swept["root"])
    assert proc.returncode == 1 and "no experiment 'nope'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command, name", [("export", "x.csv"), ("report", "x.html")])
def test_unwritable_output_is_one_line_error_naming_the_path(swept, tmp_path, command, name):
    out = tmp_path / "no-such-dir" / name
    proc = cli(
        command,
        swept["summary"]["experiment_id"],
        "--store",
        swept["url"],
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and str(out) in lines[0], proc.stderr
    assert ".tmp" not in proc.stderr, "only the path the user gave is named"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command, name", [("export", "x.csv"), ("report", "x.html")])
def test_failed_output_rename_leaves_no_temp_file(
    swept, tmp_path, monkeypatch, capsys, command, name
):
    from dnnframe.cli import main

    def refuse(self, target):
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(Path, "replace", refuse)  # the temp file is written, the rename fails
    out = tmp_path / name
    with pytest.raises(SystemExit) as exc:
        main([command, swept["summary"]["experiment_id"], "--store", swept["url"], "-o", str(out)])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and str(out) in err and "Permission denied" in err
    assert list(tmp_path.iterdir()) == [], "no half-written temp file is left behind"


def test_read_only_commands_do_not_create_a_store(tmp_path):
    db = tmp_path / "typo.db"
    url = f"sqlite:///{db}"
    for args in (
        ["status"],
        ["ls"],
        ["export", "exp"],
        ["report", "exp"],
        ["paper-report", str(tmp_path / "paper")],
    ):
        proc = cli(*args, "--store", url, cwd=tmp_path)
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stderr.startswith(f"error: no store at '{db}'"), (args, proc.stderr)
        assert "nothing has been run with this store yet" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert list(tmp_path.iterdir()) == [], f"{args[0]} created {list(tmp_path.iterdir())}"
    proc = cli("status", cwd=tmp_path)  # the default store too
    assert proc.returncode == 1 and "no store at 'dnnframe.db'" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_validate_counts_trials_or_names_every_error(tmp_path):
    good = write_spec(tmp_path / "good.yaml", TINY)
    proc = cli("validate", str(good), cwd=tmp_path)
    assert proc.returncode == 0 and "4 trials" in proc.stdout
    bad = write_spec(
        tmp_path / "bad.yaml",
        {**TINY, "model": {"hidden_layers": {"grid": [1, -1]}, "activation": "swish"}},
    )
    proc = cli("validate", str(good), str(bad), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{bad}: model.hidden_layers.grid[1]:" in proc.stderr
    assert f"{bad}: model.activation:" in proc.stderr and "swish" in proc.stderr
    proc = cli("run", str(bad), "--store", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path)
    assert proc.returncode == 2 and "model.activation" in proc.stderr
    assert not (tmp_path / "x.db").exists(), "an invalid spec must not touch the store"


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_missing_spec_file_is_named_plainly(tmp_path, command):
    store = ["--store", f"sqlite:///{tmp_path / 'x.db'}"] if command == "run" else []
    proc = cli(command, "nope.yaml", *store, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("nope.yaml: ") and "not found" in proc.stderr, proc.stderr
    assert "<root>" not in proc.stderr and "Traceback" not in proc.stderr


def test_an_unreachable_mongodb_is_one_line(tmp_path):
    """Nothing listens on port 1: pymongo's topology description stays out of the message."""
    proc = cli(
        "ls",
        "--store",
        "mongodb://127.0.0.1:1/dnnframe",
        cwd=tmp_path,
        env={"DNNFRAME_MONGO_TIMEOUT_S": "0.5"},
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: store URL 'mongodb://127.0.0.1:1/dnnframe': ")
    assert "unreachable" in proc.stderr and "Topology" not in proc.stderr


def test_ls_never_cuts_ids_at_80_columns(tmp_path):
    from dnnframe.spec import parse_spec
    from dnnframe.submit import submit_experiment

    url = f"sqlite:///{tmp_path / 'many.db'}"
    with open_store(url) as store:
        ids = [
            submit_experiment(parse_spec({**TINY, "name": name}), store).experiment.id
            for name in ("x", "a-rather-long-experiment-name-that-goes-on-and-on")
        ]
    for columns in ("80", "100"):
        # a terminal of that width (TTY_COMPATIBLE: rich treats the pipe as one)
        proc = cli(
            "ls",
            "--store",
            url,
            cwd=tmp_path,
            env={"COLUMNS": columns, "TTY_COMPATIBLE": "1", "NO_COLOR": "1"},
        )
        assert proc.returncode == 0, proc.stderr
        lines = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout).splitlines()  # bold headers
        assert all(len(line) <= int(columns) for line in lines)
        words = {w for line in lines for w in line.split()}
        assert set(ids) <= words, proc.stdout
    # not a terminal (a file, a pipe): one line per experiment, whatever the width says
    proc = cli("ls", "--store", url, cwd=tmp_path, env={"COLUMNS": "40"})
    rows = [line.split() for line in proc.stdout.splitlines()[2:]]
    assert [row[:2] for row in rows] == [
        [ids[1], "a-rather-long-experiment-name-that-goes-on-and-on"],
        [ids[0], "x"],
    ], proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize(
    "url, message",
    [
        ("sqlite:////nonexistent-dir/sub/x.db", "does not exist"),
        ("mysql://db/x", "not supported"),
        ("sqlite:///{tmp}/corrupt.db", "not a SQLite database"),
    ],
)
def test_bad_store_is_a_clear_error_not_a_traceback(tmp_path, url, message):
    (tmp_path / "corrupt.db").write_bytes(b"not a database at all\n" * 20)
    spec = write_spec(tmp_path / "tiny.yaml", TINY)
    url = url.format(tmp=tmp_path)
    for args, env in (
        (["run", str(spec), "--store", url], None),
        (["run", str(spec)], {"DNNFRAME_STORE_URL": url}),
        (["ls", "--store", url], None),
    ):
        proc = cli(*args, cwd=tmp_path, env=env)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("error:") and message in proc.stderr
        assert "Traceback" not in proc.stderr
    assert (tmp_path / "corrupt.db").read_bytes() == b"not a database at all\n" * 20


GATED = {
    "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:gated_train",
    "DNNFRAME_HOOK_EPOCHS": "2",
    "DNNFRAME_HOOK_EPOCH_SECONDS": "0.05",
}


@pytest.fixture
def background_run(tmp_path):
    """Factory: start ``dnnframe run ARGS`` in its own session (so SIGINT reaches all its
    processes, as Ctrl-C in a terminal does); whatever is left is SIGKILLed at teardown."""
    started: list[subprocess.Popen] = []

    def start(*args: str, env: dict | None = None) -> subprocess.Popen:
        full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        # An ignored SIGINT is inherited through exec: if anything earlier in this pytest
        # process left SIGINT ignored, the run would ignore Ctrl-C. A terminal's process
        # starts with SIGINT at its default, so the child is started that way.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dnnframe.cli", "run", *args],
                cwd=tmp_path,
                env=full_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        finally:
            signal.signal(signal.SIGINT, previous)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)


def wait_for_store(url: str, proc: subprocess.Popen, predicate, what: str, timeout: float = 240):
    """Poll the store until ``predicate(store)`` returns something truthy (returned) while
    ``proc`` runs; fail naming ``what`` if ``proc`` ends or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    path = Path(url.removeprefix("sqlite:///"))
    while proc.poll() is None and time.monotonic() < deadline:
        if path.exists():
            with open_store(url) as store:
                found = predicate(store)
            if found:
                return found
        time.sleep(0.05)
    pytest.fail(f"{what} did not happen while the run was alive (exit code {proc.poll()})")


def process_gone(pid: int) -> bool:
    """No process ``pid`` is left, or only its zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_sigint_stops_cleanly_and_a_rerun_resumes(tmp_path, background_run):
    """Ctrl-C after the two free trials completed (the other six train until cancelled):
    exactly those two stay COMPLETE, the rest are CANCELLED, and a rerun finishes the six
    without touching the two."""
    spec = write_spec(
        tmp_path / "long.yaml",
        {
            "name": "interrupt-me",
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 1, "width": 8},
            "training": {"max_epochs": 2},
            "search": {"seeds": 8},
        },
    )
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    # one trial per pack: the hook trains a pack's members one after another, and a pack's
    # members are recorded together when it ends
    proc = background_run(
        str(spec),
        "--store",
        url,
        "--workers",
        "2",
        "--json",
        "--pack-size",
        "1",
        env={**GATED, "DNNFRAME_HOOK_FREE_SEEDS": "2"},
    )

    def two_complete(store) -> bool:
        exps = store.list_experiments()
        return bool(exps) and store.counts_by_state(exps[0].id).get("COMPLETE", 0) >= 2

    wait_for_store(url, proc, two_complete, "two trials completing")
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    # cancelled trials are not "finished": the last progress line says how far it got
    progress = [line for line in err.splitlines() if line.startswith("interrupt-me: ")]
    assert progress[-1].startswith(
        "interrupt-me: 2/8 trials finished, 0 running, 0 failed, 6 cancelled, "
    ), progress
    assert "ETA -:--:--" in progress[-1] and not any("8/8" in line for line in progress)
    resume = [
        line.partition("resume with: ")[2] for line in err.splitlines() if "resume with: " in line
    ]
    assert resume == [f"dnnframe run {spec} --store {url} -w 2 --pack-size 1"], err
    summary = json.loads(out)
    assert summary["interrupted"] is True
    with open_store(url) as store:
        exp_id = summary["experiment_id"]
        first = {t.id: t for t in store.list_trials(exp_id)}
    done_first = {tid: t.started_at for tid, t in first.items() if t.state.value == "COMPLETE"}
    assert sorted(first[tid].config["seed"] for tid in done_first) == [0, 1]
    assert sorted(t.state.value for t in first.values()) == ["CANCELLED"] * 6 + ["COMPLETE"] * 2

    # the printed command, from another directory: it names the store and the workers
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc2 = cli(
        *shlex.split(resume[0])[1:],
        "--json",
        "--quiet",
        cwd=elsewhere,
        env={**GATED, "DNNFRAME_HOOK_FREE_SEEDS": "8"},
    )
    assert proc2.returncode == 0, proc2.stderr
    again = json.loads(proc2.stdout)
    assert again["trials_run_now"] == 6
    with open_store(url) as store:
        final = store.list_trials(exp_id)
    assert len(final) == 8 and all(t.state.value == "COMPLETE" for t in final)
    assert all(t.attempts == 1 for t in final), "every trial completed exactly once"
    assert {t.id: t.started_at for t in final if t.id in done_first} == done_first


def test_a_rerun_finishes_trials_a_killed_run_left_running(tmp_path):
    from dnnframe.spec import parse_spec
    from dnnframe.submit import submit_experiment

    url = f"sqlite:///{tmp_path / 'killed.db'}"
    spec_path = write_spec(tmp_path / "tiny.yaml", TINY)
    with open_store(url) as store:
        result = submit_experiment(parse_spec(TINY), store)
        orphan = result.trial_ids[0]
        assert store.claim_trial(orphan, "gone-host:4242") is not None  # its worker then died
    # its heartbeat (at the claim) is older than this timeout by the time the run starts
    proc = cli(
        "run",
        str(spec_path),
        "--store",
        url,
        "--json",
        cwd=tmp_path,
        env={"DNNFRAME_HEARTBEAT_TIMEOUT": "0.000001"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "re-queued 1 trials" in proc.stderr
    with open_store(url) as store:
        t = store.get_trial(orphan)
        assert t.state.value == "COMPLETE" and t.attempts == 2 and t.worker != "gone-host:4242"
        assert store.counts_by_state(result.experiment.id)["COMPLETE"] == 4


def test_example_specs_are_valid_rest_bodies(tmp_path):
    from dnnframe.spec import count_trials, parse_spec

    paths = sorted((REPO / "experiments").glob("*.yaml"))
    names = {p.name for p in paths}
    assert {"quickstart.yaml", "depth.yaml", "activation_optimizer.yaml"} <= names
    for p in paths:  # the dict a REST client would POST
        assert count_trials(parse_spec(yaml.safe_load(p.read_text()))) >= 1
    proc = cli("validate", *map(str, paths), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "experiments/quickstart.yaml: ok, 6 trials" in proc.stdout


def test_rerun_after_kill_9_of_the_whole_run_finishes_orphaned_trials_at_once(
    tmp_path, background_run
):
    """kill -9 of `dnnframe run` and its workers (a closed terminal, the OOM killer) leaves
    trials RUNNING under dead processes; a rerun right away — with the default 300 s heartbeat
    timeout — requeues them because their owners no longer exist, and finishes the sweep."""
    spec = write_spec(
        tmp_path / "long.yaml",
        {
            "name": "kill-me",
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 1, "width": 8},
            "training": {"max_epochs": 2},
            "search": {"seeds": 4},
        },
    )
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    proc = background_run(str(spec), "--store", url, "--workers", "2", "--quiet", env=GATED)

    def trials_mid_way(store) -> list:
        return [t for t in store.list_trials(state="RUNNING") if t.metrics]

    wait_for_store(url, proc, trials_mid_way, "a trial training")
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its worker processes, no cleanup
    proc.communicate(timeout=30)
    with open_store(url) as store:
        orphaned = {t.id: t.worker for t in store.list_trials(state="RUNNING")}
    assert orphaned, "the kill left no RUNNING trial behind"
    owners = {int(worker.rpartition(":")[2]) for worker in orphaned.values()}
    deadline = time.monotonic() + 30
    while not all(process_gone(pid) for pid in owners):  # the kernel finishes the kill
        assert time.monotonic() < deadline, f"processes {owners} outlived SIGKILL"
        time.sleep(0.05)
    again = cli(
        "run",
        str(spec),
        "--store",
        url,
        "--workers",
        "2",
        "--json",
        cwd=tmp_path,
        timeout=240,
        env={**GATED, "DNNFRAME_HOOK_FREE_SEEDS": "4"},
    )
    assert again.returncode == 0, again.stderr
    assert f"re-queued {len(orphaned)} trials" in again.stderr
    with open_store(url) as store:
        final = {t.id: t for t in store.list_trials()}
    assert all(t.state.value == "COMPLETE" for t in final.values()), [
        (t.state, t.error, t.attempts, t.id in orphaned) for t in final.values()
    ]
    assert all(final[tid].attempts == 2 for tid in orphaned)


# --------------------------------------------------------------------------- progress display
def test_the_live_bar_fits_80_columns_with_the_best_result():
    """On an 80-column terminal the bar, the counts, elapsed and ETA all stay whole, with a
    long name and the best result shown; an interrupted run keeps its real count."""
    import io

    from rich.cells import cell_len
    from rich.console import Console

    from dnnframe.cli.progress import RunProgress

    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None)
    progress = RunProgress(console, "depth-vs-activation-and-optimizer-sweep", 30, {"QUEUED": 30})
    progress.update(
        {"COMPLETE": 11, "RUNNING": 2, "QUEUED": 17}, "best test_accuracy 0.9733", running_packs=1
    )
    console.print(progress.renderable)
    progress.mark_interrupted()
    progress.update({"COMPLETE": 11, "CANCELLED": 19}, "best test_accuracy 0.9733")
    console.print(progress.renderable)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and all(cell_len(line) <= 80 for line in lines), lines
    for bar in (lines[0], lines[2]):
        # the bar (filled ━, the rest blank without colours) keeps a readable width
        assert re.search(r"… [━╸ ]{25,} 11/30 \d:\d\d:\d\d ETA \S+$", bar), bar
        assert bar.count("…") == 1, "only the long name is shortened"
    assert lines[1].split() == [
        "running",
        "2",
        "trials",
        "in",
        "1",
        "pack",
        "·",
        "failed",
        "0",
        "·",
        "best",
        "test_accuracy",
        "0.9733",
    ]
    assert lines[2].endswith("ETA -:--:--") and "cancelled 19" in lines[3]


def test_plain_progress_lines_every_tenth_and_periodically():
    """Not a terminal: a line when another tenth finished or 30 s passed, never a repeat."""
    import io

    from rich.console import Console

    from dnnframe.cli.progress import RunProgress

    out = io.StringIO()
    now = [0.0]
    console = Console(file=out, width=200, force_terminal=False)
    with RunProgress(console, "sweep", 100, {"QUEUED": 100}, clock=lambda: now[0]) as progress:
        for t, complete, running in (
            (1, 5, 2),
            (2, 10, 2),
            (3, 12, 2),
            (40, 12, 2),
            (41, 12, 2),
            (42, 20, 0),
        ):
            now[0] = t
            progress.update(
                {"COMPLETE": complete, "RUNNING": running, "QUEUED": 100 - complete - running},
                "best test_accuracy 0.9000",
            )
        now[0] = 50
        progress.update({"COMPLETE": 21, "FAILED": 1, "CANCELLED": 78})
    assert out.getvalue().splitlines() == [
        "sweep: 10/100 trials finished, 2 running, 0 failed, elapsed 0:00:02, ETA 0:00:18, "
        "best test_accuracy 0.9000",
        "sweep: 12/100 trials finished, 2 running, 0 failed, elapsed 0:00:40, ETA 0:04:53, "
        "best test_accuracy 0.9000",
        "sweep: 20/100 trials finished, 0 running, 0 failed, elapsed 0:00:42, ETA 0:02:48, "
        "best test_accuracy 0.9000",
        "sweep: 22/100 trials finished, 0 running, 1 failed, 78 cancelled, elapsed 0:00:50, "
        "ETA 0:02:57",
    ]


# --------------------------------------------------------------------------- a newcomer's run


@pytest.fixture
def hooks():
    """Environment that makes ``dnnframe run`` train with ``dnnframe.testing.hooks:NAME``
    (the worker processes load it by name)."""

    def env(name: str) -> dict:
        return {"DNNFRAME_TRAIN_FN": f"dnnframe.testing.hooks:{name}"}

    return env


def test_a_gpu_that_is_not_here_is_refused_in_one_line_before_anything_runs(tmp_path):
    from dnnframe.engine.backend import probe

    if probe({**os.environ, "THEANO_FLAGS": "device=cuda"}) is None:
        skip_optional("this machine has a usable CUDA GPU")
    spec = write_spec(tmp_path / "tiny.yaml", TINY)
    proc = cli("run", "tiny.yaml", "-w", "2", cwd=tmp_path, env={"THEANO_FLAGS": "device=cuda"})
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: refusing to run: device=cuda "), lines
    assert "'dnnframe[gpu]'" in lines[0], lines  # the fix, its brackets intact
    assert list(tmp_path.iterdir()) == [spec], "no store, no trial touched"


@pytest.mark.slow
def test_failed_trials_are_one_line_each_and_a_rerun_names_retry_failed(tmp_path, hooks):
    """Each FAILED trial: its id and its error's line, intact (no markup eaten), then where
    the whole error is; a rerun says the FAILED trials stay and how to run them again."""
    write_spec(tmp_path / "tiny.yaml", TINY)
    proc = cli("run", "tiny.yaml", "-w", "2", cwd=tmp_path, env=hooks("fail_train"))
    assert proc.returncode == 1, proc.stderr
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == 4, proc.stdout
    for line in failed:
        assert re.fullmatch(
            r"FAILED t-\w+: RuntimeError: device=cuda but no GPU here "
            r"\(pip install 'dnnframe\[gpu\]'\)",
            line,
        ), line
    store = f"sqlite:///{tmp_path / 'dnnframe.db'}"
    exp_id = json.loads(cli("status", "--json", cwd=tmp_path).stdout)["experiment_id"]
    details = f"every error in full: dnnframe status {exp_id} --store {store} --failed"
    assert details in proc.stdout
    retry = f"dnnframe run {tmp_path / 'tiny.yaml'} --store {store} -w 2 --retry-failed"
    assert proc.stdout.splitlines()[-1] == f"run the FAILED trials again with: {retry}"

    full = cli(*shlex.split(details.partition(": ")[2])[1:], cwd=REPO)
    assert full.returncode == 0, full.stderr
    assert full.stdout.count("FAILED t-") == 4 and "Traceback" in full.stdout

    again = cli("run", "tiny.yaml", "-w", "2", cwd=tmp_path, env=hooks("fail_train"))
    assert again.returncode == 1
    assert (
        "4 trials FAILED before and are not run again: add --retry-failed to run them again"
    ) in again.stderr
    ok = cli(*shlex.split(retry)[1:], cwd=REPO, env=hooks("cuda_train"))
    assert ok.returncode == 0, ok.stderr
    assert "COMPLETE 4" in ok.stdout and "FAILED" not in ok.stdout


def test_a_rerun_says_which_trials_it_reuses_from_another_device(tmp_path, hooks):
    write_spec(tmp_path / "tiny.yaml", TINY)
    first = cli("run", "tiny.yaml", "-w", "2", cwd=tmp_path, env=hooks("cuda_train"))
    assert first.returncode == 0, first.stderr
    again = cli("run", "tiny.yaml", "-w", "2", cwd=tmp_path, env={"THEANO_FLAGS": "device=cpu"})
    assert again.returncode == 0, again.stderr
    assert (
        "reusing 4 trials already COMPLETE on cuda:0 (this run trains on cpu); they are not "
        "trained again"
    ) in again.stderr.splitlines()


def test_results_go_to_stdout_progress_to_stderr_and_commands_are_absolute(tmp_path, hooks):
    """Run from one directory with a relative spec and the default store; the printed
    commands work pasted anywhere."""
    write_spec(tmp_path / "tiny.yaml", TINY)
    proc = cli("run", "tiny.yaml", "-w", "2", cwd=tmp_path, env=hooks("cuda_train"))
    assert proc.returncode == 0, proc.stderr
    assert "trials finished" in proc.stderr and "trials finished" not in proc.stdout
    assert proc.stdout.startswith("cli-tiny (exp-") and "COMPLETE 4" in proc.stdout
    assert "cli-tiny (exp-" not in proc.stderr.splitlines()[-1]
    store = f"sqlite:///{tmp_path / 'dnnframe.db'}"
    commands = [line.strip() for line in proc.stdout.splitlines() if line.startswith("  dnnframe ")]
    assert commands and all(f"--store {store}" in c for c in commands), commands
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    status = cli(*shlex.split(commands[0])[1:], cwd=elsewhere)
    assert status.returncode == 0 and "COMPLETE 4" in status.stdout, status.stderr
    assert list(elsewhere.iterdir()) == []


@pytest.mark.slow
def test_sigterm_stops_as_cleanly_as_ctrl_c(tmp_path, background_run):
    """`timeout` signals the whole process group, `kill` only the run: either way the two
    finished trials stay COMPLETE, the six others end CANCELLED, none is left RUNNING."""
    spec = write_spec(
        tmp_path / "long.yaml",
        {
            "name": "terminate-me",
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 1, "width": 8},
            "training": {"max_epochs": 2},
            "search": {"seeds": 8},
        },
    )
    for n, signal_group in enumerate((True, False)):
        url = f"sqlite:///{tmp_path / f'term{n}.db'}"
        proc = background_run(
            str(spec),
            "--store",
            url,
            "--workers",
            "2",
            "--pack-size",
            "1",
            env={**GATED, "DNNFRAME_HOOK_FREE_SEEDS": "2"},
        )

        def two_complete_two_training(store) -> bool:
            return (
                len([t for t in store.list_trials(state="COMPLETE")]) >= 2
                and len([t for t in store.list_trials(state="RUNNING") if t.metrics]) == 2
            )

        wait_for_store(url, proc, two_complete_two_training, "two trials training")
        if signal_group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, err
        assert "Traceback" not in err and "resume with: dnnframe run" in out
        with open_store(url) as store:
            trials = store.list_trials()
        assert sorted(t.state.value for t in trials) == ["CANCELLED"] * 6 + ["COMPLETE"] * 2
        stopped = [t for t in trials if t.state.value == "CANCELLED" and t.metrics]
        assert len(stopped) == 2 and all("cancelled after" in t.error for t in stopped), [
            t.error for t in stopped
        ]


def test_a_closed_output_pipe_and_ctrl_c_stop_the_run(tmp_path):
    """`dnnframe run … 2>&1 | head -2`, then Ctrl-C (SIGINT to the run and to head): the run
    must stop cleanly although nothing can be written any more."""
    spec = write_spec(
        tmp_path / "long.yaml",
        {
            "name": "piped",
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 1, "width": 8},
            "training": {"max_epochs": 2},
            "search": {"seeds": 6},
        },
    )
    url = f"sqlite:///{tmp_path / 'piped.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO), **GATED, "DNNFRAME_HOOK_FREE_SEEDS": "2"}
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dnnframe.cli",
                "run",
                str(spec),
                "--store",
                url,
                "-w",
                "2",
                "--pack-size",
                "1",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        head = [proc.stdout.readline(), proc.stdout.readline()]
        assert head[0].startswith("piped (exp-"), head
        wait_for_store(
            url,
            proc,
            lambda store: len([t for t in store.list_trials(state="RUNNING") if t.metrics]) == 2,
            "two trials training",
        )
        proc.stdout.close()  # head -2 has what it wanted and exits
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    with open_store(url) as store:
        states = sorted(t.state.value for t in store.list_trials())
    assert states == ["CANCELLED"] * 4 + ["COMPLETE"] * 2


def test_progress_counts_trials_in_packs_and_keeps_its_eta_between_packs():
    """Six trials training in two packs say so; a long pause between finishing packs keeps
    the ETA at the rate since the start (rich's own estimate forgets after 30 s)."""
    import io

    from rich.console import Console

    from dnnframe.cli.progress import RunProgress

    out = io.StringIO()
    now = [0.0]
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    progress = RunProgress(console, "packs", 12, {"QUEUED": 12}, clock=lambda: now[0])
    now[0] = 60.0
    progress.update({"COMPLETE": 6, "RUNNING": 6}, running_packs=2)
    now[0] = 200.0  # no pack finished for 140 s
    progress.update({"COMPLETE": 6, "RUNNING": 6}, running_packs=2)
    console.print(progress.renderable)
    bar, detail = out.getvalue().splitlines()
    assert bar.endswith("ETA 0:03:20"), bar  # 6 left at 6 per 200 s
    assert detail.split(" · ")[0].strip() == "running 6 trials in 2 packs"
    assert progress.plain_line().startswith(
        "packs: 6/12 trials finished, running 6 trials in 2 packs, 0 failed, elapsed 0:03:20, "
        "ETA 0:03:20"
    )


def test_progress_says_graphs_are_building_until_a_trial_ends(tmp_path, hooks):
    """Two graphs (relu and tanh, at one depth) that take long to build:
    the log says so at once rather than looking frozen, and stops saying it once trials end."""
    write_spec(
        tmp_path / "tiny.yaml",
        {
            **TINY,
            "model": {"hidden_layers": 1, "width": 8, "activation": {"grid": ["relu", "tanh"]}},
        },
    )
    hold = tmp_path / "built"
    env = {**os.environ, **hooks("held_train"), "DNNFRAME_HOOK_GATE": str(hold)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dnnframe.cli", "run", "tiny.yaml", "-w", "2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        while not lines or "trials finished" not in lines[-1]:
            lines.append(proc.stderr.readline())
            assert lines[-1], f"the run ended early: {lines}"
        assert lines[-1].startswith("cli-tiny: 0/4 trials finished, building graphs 0/2, "), lines
        hold.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        hold.touch()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    last = [line for line in err.splitlines() if "trials finished" in line][-1]
    assert last.startswith("cli-tiny: 4/4 trials finished, 0 running") and "building" not in last


def test_progress_shows_graphs_ready_as_they_build():
    import io

    from rich.console import Console

    from dnnframe.cli.progress import RunProgress

    out = io.StringIO()
    now = [0.0]
    console = Console(file=out, width=200, force_terminal=False)
    with RunProgress(console, "cold", 6, {"QUEUED": 6}, clock=lambda: now[0]) as progress:
        for t, ready in ((1, 0), (2, 0), (3, 1), (4, 3)):
            now[0] = t
            progress.update({"RUNNING": 4, "QUEUED": 2}, running_packs=2, graphs=(ready, 3))
    assert out.getvalue().splitlines() == [
        "cold: 0/6 trials finished, building graphs 0/3, running 4 trials in 2 packs, 0 failed, "
        "elapsed 0:00:01, ETA -:--:--",
        "cold: 0/6 trials finished, building graphs 1/3, running 4 trials in 2 packs, 0 failed, "
        "elapsed 0:00:03, ETA -:--:--",
        "cold: 0/6 trials finished, running 4 trials in 2 packs, 0 failed, elapsed 0:00:04, "
        "ETA -:--:--",
    ]
    screen = io.StringIO()
    terminal = Console(file=screen, width=100, force_terminal=True, color_system=None)
    live = RunProgress(terminal, "cold", 6)
    live.update({"RUNNING": 4, "QUEUED": 2}, running_packs=2, graphs=(1, 3))
    terminal.print(live.renderable)
    detail = screen.getvalue().splitlines()[1].strip()
    assert detail.startswith("building graphs 1/3 · running 4 trials in 2 packs"), detail


def test_a_run_on_a_terminal_shows_the_live_bar_and_ends(tmp_path, hooks):
    """On a terminal (a pseudo-terminal here) the live bar draws while rich redirects the
    standard streams, and the run ends with its summary."""
    import pty
    import select

    write_spec(tmp_path / "tiny.yaml", TINY)
    env = {**os.environ, **hooks("cuda_train"), "COLUMNS": "80", "LINES": "24"}
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dnnframe.cli", "run", "tiny.yaml", "-w", "2"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    screen = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # the run ended and closed the terminal
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=10) == 0, screen.decode(errors="replace")[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        os.close(main)
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", screen.decode(errors="replace"))
    assert "4/4" in text and "COMPLETE 4" in text, text[-2000:]


def test_an_in_memory_store_is_refused_where_training_runs_in_other_processes(tmp_path):
    spec = write_spec(tmp_path / "tiny.yaml", TINY)
    for args in (
        ["run", str(spec), "--store", "memory://x"],
        ["worker", "--store", "memory://x"],
        ["serve", "--store", "memory://x"],
    ):
        proc = cli(*args, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith(
            "error: store URL 'memory://x' is an in-memory store, for tests and one-process use"
        ), proc.stderr
        assert "Traceback" not in proc.stderr


def test_processes_spawned_under_the_console_script_do_not_run_it_again(monkeypatch):
    # pip's console script is a main module with a path and no spec: multiprocessing would
    # run it again in every spawned worker, importing the whole CLI there; run as
    # ``python -m dnnframe.cli``, a package's __main__, it is skipped
    import multiprocessing.spawn
    import types

    import dnnframe.cli

    script = types.ModuleType("__main__")
    script.__file__ = str(Path(sys.prefix, "bin", "dnnframe"))
    script.main = dnnframe.cli.main
    script.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert "init_main_from_path" in multiprocessing.spawn.get_preparation_data("w")
    monkeypatch.setattr(dnnframe.cli, "cli", types.SimpleNamespace(main=lambda **_: None))
    dnnframe.cli.main([])
    data = multiprocessing.spawn.get_preparation_data("w")
    assert data["init_main_from_name"] == "dnnframe.cli.__main__"
    assert "init_main_from_path" not in data

    # a program of the user's that calls main() keeps its own main module
    program = types.ModuleType("__main__")
    program.__file__, program.__spec__ = "/home/me/sweep.py", None
    monkeypatch.setitem(sys.modules, "__main__", program)
    dnnframe.cli.main([])
    assert program.__spec__ is None
    assert multiprocessing.spawn.get_preparation_data("w")["init_main_from_path"] == (
        "/home/me/sweep.py"
    )


def test_a_sweep_smaller_than_the_pool_starts_a_worker_per_trial(tmp_path):
    # each worker costs a second or more of CPU to import and warm up: a one-trial run on
    # four workers starts one
    spec = write_spec(tmp_path / "one.yaml", {**TINY, "model": {"width": 4}, "search": {}})
    url = f"sqlite:///{tmp_path / 'one.db'}"
    proc = cli("run", str(spec), "--store", url, "--workers", "4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 to run in 1 packs on 1 local worker;" in proc.stderr, proc.stderr

    from dnnframe.cli.lazy_executor import StartOnSubmit

    with open_store(url) as store:
        asked: list[int] = []

        def lazy() -> StartOnSubmit:
            return StartOnSubmit(store, lambda k: asked.append(k), 4, "4 local workers", False)

        lazy().start(2), lazy().start(9), lazy().start(), lazy().start(0)
        remote = StartOnSubmit(store, lambda k: asked.append(k), 4, "amqp://", remote=True)
        remote.start(1)  # a broker's workers are not this run's to start
    assert asked == [2, 4, 4, 4, 4]
