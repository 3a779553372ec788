"""Issue 24: the checks verify runs without a model stay safe on hostile input — a command that never ends is
stopped, a command that reaches outside the workspace is not run, a huge or binary file is shown clipped, and an
outcome without a tool record (a custom executor) is judged on files alone."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from planmode.adapters.small_models import evidence as _evidence
from planmode.adapters.small_models.evidence import gather
from planmode.state.graph_state import StepOutcome, ToolRun
from planmode.state.models import Step
from planmode.tools import workspace_tools


def step(acceptance: str, tools: tuple[str, ...] = ("write_file",)) -> Step:
    return Step(id="s", description="write it", tools=list(tools), acceptance=acceptance)


def wrote(ws: Path, name: str, content: bytes) -> StepOutcome:
    path = ws / name
    path.write_bytes(content)
    run = ToolRun(name="write_file", args=f'{{"path": "{name}"}}', ok=True, result="written")
    return StepOutcome(step_id="s", ok=True, output="done", writes={str(path.resolve()): "x"}, tool_runs=[run])


def test_a_command_that_never_ends_is_stopped_and_fails_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_evidence, "COMMAND_TIMEOUT", 1.0)
    outcome = wrote(tmp_path, "spin.py", b"while True:\n    pass\n")

    started = time.monotonic()
    evidence = gather(step("`python spin.py` runs"), outcome, workspace_tools(tmp_path))

    assert time.monotonic() - started < 20
    assert [c.what for c in evidence.failed] == ["`python spin.py` runs"]
    assert "still running after 1 s" in evidence.reason()


def test_a_command_reaching_outside_the_workspace_is_not_run(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    outcome = wrote(ws, "ok.py", b"x = 1\n")

    acceptance = '`python ../evil.py` runs, `python /tmp/x.py` runs and `python -c "import os"` runs'
    evidence = gather(step(acceptance), outcome, workspace_tools(ws))

    assert not marker.exists()
    assert not evidence.failed
    commands = [c for c in evidence.checks if c.what.startswith("`python")]
    assert len(commands) == 3 and all(c.passed is None for c in commands)


def test_a_huge_or_binary_file_is_shown_clipped(tmp_path: Path) -> None:
    outcome = wrote(tmp_path, "blob.txt", b"\xff\xfe" * 200_000)

    evidence = gather(step("blob.txt exists"), outcome, workspace_tools(tmp_path))
    shown = evidence.to_prompt("x" * 100_000)

    assert not evidence.failed
    assert len(evidence.files["blob.txt"]) <= _evidence.FILE_CHARS
    assert len(shown) <= 4000


def test_an_executor_that_reports_no_tool_calls_is_judged_on_its_files(tmp_path: Path) -> None:
    """A custom executor's outcome has no tool record: the effect check cannot be made, the file checks can."""
    outcome = StepOutcome(step_id="s", ok=True, output="I wrote mathx.py")

    evidence = gather(step("mathx.py exists"), outcome, workspace_tools(tmp_path))

    assert evidence.reason() == "mathx.py exists: mathx.py was not created: write it"
    assert "(not reported by this executor)" in evidence.to_prompt("")


FOUND = _evidence.Evidence(
    runs=[],
    files={"temps.txt": "0\n100"},
    checks=[_evidence.Check("the step changed something", True), _evidence.Check("temps.txt exists", True)],
)


@pytest.mark.parametrize(
    "reason",
    [  # the 1.5B judge's own reasons for failing a right temps.txt (no report was shown)
        "The executor's report is a claim about the existence of temps.txt, while the evidence shows it exists.",
        "The evidence does not show that temps.txt exists. The file 'temps.txt' is missing from the files written.",
        "The executor did not provide a report of its own, which is required to meet the acceptance criteria.",
        "The tool wrote files that did not meet the acceptance criteria, as `temps.txt` does not exist.",
        "the claim does not specify any direct output",
        "Missing file: temps.txt",
        "the evidence does not show that the step wrote the file 'temps.txt'",
        # the 1.5B's judge on a right list_primes.py that its check ran (it printed 2 3 5 7 11 13 17 19)
        "The step did not meet the acceptance criteria because the tool calls that ran did not create the "
        "`temps.txt` file. The evidence shows that no such file was created.",
        "the temps.txt file was not created",
    ],
)
def test_a_judges_reason_that_the_evidence_contradicts_is_recognised(reason: str) -> None:
    assert FOUND.refutes(reason, report_shown=False)


@pytest.mark.parametrize(
    "reason",
    [  # judgements of the content, or of a file no check found: not contradicted
        "temps.txt is missing the number 100",
        "temps.txt has 0 and 100 on one line",
        "report.py does not print the mean",
        "out.txt does not exist",
        "the tool calls did not create the `out.txt` file",  # a file no check found
        "the numbers are not one per line",
        # the 1.5B's judge on a fizzbuzz.py that printed 15 lines: a judgement of the output, not of the write
        "The tool calls that ran did not produce the expected output.",
    ],
)
def test_a_judgement_of_the_content_is_not_taken_for_a_contradiction(reason: str) -> None:
    assert FOUND.refutes(reason, report_shown=False) == ""


def test_a_reason_on_a_shown_report_is_a_judgement_and_existence_is_covered_by_checks() -> None:
    assert FOUND.refutes("The executor's report claims 100 but the file has 10", report_shown=True) == ""
    assert FOUND.covers("temps.txt exists") and FOUND.covers("`temps.txt` is created.")
    assert not FOUND.covers("temps.txt exists and has two lines") and not FOUND.covers("")
    assert not FOUND.settles("temps.txt exists")  # existence alone still goes to the judge


def test_hostile_text_in_a_judges_reason_is_data() -> None:
    """Markup, escape sequences, a lone surrogate and regex syntax in a reason never raise or match by accident."""
    assert FOUND.refutes("\x1b[31m`temps.txt` does not exist (?:[\u202e\ud800 <b>", report_shown=True)
    assert FOUND.refutes("(.*).txt does not exist; [a-z]+.py was not created \ud800", report_shown=True) == ""
    assert FOUND.refutes("", report_shown=False) == ""


@pytest.mark.parametrize(
    "hostile",
    [
        "x.py exists and " + " " * 30_000 + "x",  # a run of white space: the clause split was quadratic on it
        "the output was " + " " * 30_000 + "instead of",  # "X instead of Y" read each start against the whole run
        "the expected output is " + " " * 30_000 + "x",
        "the actual output is: " + " " * 30_000 + "x",
        "x.py when run" + " \n" * 15_000 + "x",
    ],
)
def test_a_long_run_of_white_space_from_a_model_is_read_in_linear_time(tmp_path: Path, hostile: str) -> None:
    """A model's acceptance or reason made of tens of thousands of spaces took minutes to read (120 s at 15,000
    spaces): the clause split and three of the judge's-reason patterns matched white space around a separator
    from every position. A bound of 10 s here is for a hang, not a measure of speed (the patterns are linear)."""
    s = Step(id="s", description=hostile, tools=["write_file"], acceptance=hostile)
    started = time.monotonic()
    evidence = gather(s, wrote(tmp_path, "x.py", b"print(1)\n"), workspace_tools(tmp_path), goal=hostile)
    evidence.settles(hostile, hostile), evidence.covers(hostile), evidence.refutes(hostile, report_shown=False)
    assert time.monotonic() - started < 10
    assert not evidence.failed


def test_a_value_or_a_file_nested_too_deeply_to_read_is_not_an_error_of_the_run(tmp_path: Path) -> None:
    """A literal of 5,000 brackets in an acceptance ("f(1) returns [[[[...") raised RecursionError out of the JSON
    parser, and a Python file of 100,000 unary minuses out of ``compile()``: either ended the verify node with a
    traceback. The literal is no value (the clause goes to the judge); the file fails its compile check with why."""
    (tmp_path / "f.py").write_text("def f(x):\n    return x\n")
    acceptance = "f(1) returns " + "[" * 5_000
    evidence = gather(step(acceptance), wrote(tmp_path, "g.py", b"x = 1\n"), workspace_tools(tmp_path))
    assert not evidence.failed and not evidence.settles(acceptance, "write it")

    deep = b"x = " + b"-" * 100_000 + b"1\n"
    evidence = gather(step("deep.py exists"), wrote(tmp_path, "deep.py", deep), workspace_tools(tmp_path))
    assert [c.what for c in evidence.failed] == ["deep.py compiles"]
    assert "nested too deeply" in evidence.reason()


DEFINED_ONLY = b"def list_primes(limit):\n    return [n for n in range(2, limit) if all(n % d for d in range(2, n))]\n"


@pytest.mark.parametrize(
    "acceptance",
    [
        "list_primes.py exists and `python list_primes.py` prints the primes below 20",
        "list_primes.py prints the primes below 20 on one line",
        "The `python list_primes.py` command should run without errors and print `2 3 5`.",  # the 1.5B's wording
    ],
)
def test_a_script_asked_to_print_that_prints_nothing_fails_with_the_fix(tmp_path: Path, acceptance: str) -> None:
    """The 1.5B's list_primes.py defined its function and never called it: it ran, printed nothing, and only a
    judge stood between it and 'done'. An acceptance that asks a script to print fails it when it prints nothing;
    the reason names the fix. The same script that prints passes the check."""
    evidence = gather(step(acceptance), wrote(tmp_path, "list_primes.py", DEFINED_ONLY), workspace_tools(tmp_path))
    assert [c.what for c in evidence.failed] == ["`python list_primes.py` runs"]
    assert "printed nothing" in evidence.reason() and "call it" in evidence.reason()

    printing = DEFINED_ONLY + b"print(*list_primes(20))\n"
    evidence = gather(step(acceptance), wrote(tmp_path, "list_primes.py", printing), workspace_tools(tmp_path))
    assert not evidence.failed
    assert any(c.what == "`python list_primes.py` runs" and c.detail.startswith("2 3 5") for c in evidence.checks)


def test_a_script_only_asked_to_run_may_print_nothing(tmp_path: Path) -> None:
    evidence = gather(step("`python mod.py` runs"), wrote(tmp_path, "mod.py", DEFINED_ONLY), workspace_tools(tmp_path))
    assert not evidence.failed and evidence.settles("`python mod.py` runs")


def test_a_reason_that_the_output_is_missing_is_contradicted_by_a_command_that_printed(tmp_path: Path) -> None:
    """The 1.5B's judge failed a primes.py that printed the primes below 20 because 'the actual output is missing'.
    What a command printed is shown line by line (folded to one line, one number a line read as '2 3 5'), and a
    reason that it printed nothing is contradicted by it."""
    script = b"for n in (2, 3, 5):\n    print(n)\n"
    evidence = gather(
        step("`python p.py` prints the primes"), wrote(tmp_path, "p.py", script), workspace_tools(tmp_path)
    )
    assert "- `python p.py` runs: passed, printing:\n    2\n    3\n    5" in evidence.to_prompt("")
    said = "The expected primes are 2, 3, 5, but the actual output is missing."
    assert evidence.refutes(said, report_shown=False) == "the checks show output: `python p.py` printed '2\\n3\\n5'"
    assert evidence.refutes("it prints 2 3 5 one per line, not on one line", report_shown=False) == ""
    assert not evidence.settles("`python p.py` prints '2 3 5'")  # three lines are not one line


def test_a_step_that_says_it_prints_is_settled_only_by_a_quoted_output() -> None:
    ran = _evidence.Evidence(
        runs=[],
        checks=[_evidence.Check("report.py exists", True), _evidence.Check("`python report.py` runs", True, "32.0")],
    )
    says = "Write report.py that prints c_to_f of 0"
    assert ran.settles("report.py exists and `python report.py` runs")  # nothing said of printing: it ran
    assert not ran.settles("report.py exists and `python report.py` runs", says)  # the judge reads the output
    assert ran.settles("`python report.py` prints '32.0'", says)  # the output the acceptance quotes
    assert not ran.settles("`python report.py` prints '31.0'", says)
    assert not _evidence.Evidence(runs=[], checks=[_evidence.Check("the step changed something", True)]).settles(
        "", says
    )


def test_a_script_the_acceptance_says_exists_and_runs_is_run(tmp_path: Path) -> None:
    """A false 'completed' on llama-server: the 1.5B's acceptance 'list_primes.py exists and runs with expected
    output' named no command, nothing ran, and the judge passed a silent script on 'the successful execution of
    the print statement'. 'X.py exists and runs' runs X.py; a step that says its script prints fails when it
    printed nothing."""
    says = Step(
        id="s",
        description="Write list_primes.py that prints the primes below 20",
        tools=["write_file"],
        acceptance="list_primes.py exists and runs with expected output",
    )
    evidence = gather(says, wrote(tmp_path, "list_primes.py", DEFINED_ONLY), workspace_tools(tmp_path))
    assert [c.what for c in evidence.failed] == ["`python list_primes.py` runs"]
    assert "printed nothing" in evidence.reason()


def test_a_script_that_says_it_prints_and_is_not_run_is_shown_as_not_run(tmp_path: Path) -> None:
    says = Step(
        id="s",
        description="Write list_primes.py that prints the primes below 20",
        tools=["write_file"],
        acceptance="list_primes.py exists",
    )
    evidence = gather(says, wrote(tmp_path, "list_primes.py", DEFINED_ONLY), workspace_tools(tmp_path))
    assert not evidence.failed and not evidence.settles(says.acceptance, says.description)
    assert "- `python list_primes.py` runs: not checked (not run: the acceptance names no command" in (
        evidence.to_prompt("")
    )


HELLO = _evidence.Evidence(
    runs=[],
    files={"hello.py": "print('Hello, world!')"},
    checks=[_evidence.Check("hello.py exists", True), _evidence.Check("`python hello.py` runs", True, "Hello, world!")],
)


def test_a_judges_reason_that_a_file_should_hold_what_it_holds_is_contradicted() -> None:
    """The 1.5B's judge failed a right hello.py twice: "The file should contain 'print('Hello, world!')', not
    'print('Hello, world!')'". A reason that says a file or output should hold a quoted text that it holds is
    contradicted (quotes inside the quoted text kept); one whose text is absent, or that quotes nothing, stands."""
    said = "The file should contain 'print('Hello, world!')', not 'print('Hello, world!')'."
    assert HELLO.refutes(said, report_shown=False) == "hello.py contains \"print('Hello, world!')\""
    assert HELLO.refutes('It should print "Hello, world!" exactly', report_shown=False) == (
        "`python hello.py` printed 'Hello, world!'"
    )
    assert HELLO.refutes("The file should contain 'print(\"Hello\")'.", report_shown=False) == ""
    assert HELLO.refutes("should contain 'Hello' and should print 'Bye'", report_shown=False) == ""
    assert HELLO.refutes("The content does not do what the step says.", report_shown=False) == ""
    assert HELLO.refutes("should contain 'print(\ud800 (?:[a-z]+ \x1b[31m", report_shown=False) == ""


@pytest.mark.parametrize(
    ("description", "settled"),
    [
        ("Write hello.py with print('Hello, world!')", True),
        ("Write hello.py that prints exactly: Hello, world!", True),
        ('Write hello.py that prints exactly "Hello, world!"', True),
        ("Write hello.py that prints a greeting", False),  # what a greeting is stays the judge's
        ("Write hello.py with print('Hello')", False),  # it printed more than the description gives
        ("Write hello.py with print('Hello, world!' + name)", False),  # not the whole output
        ("Write hello.py to print 'Hello, world!'", True),  # round 12's: the quoted text ends the description
        ('Write hello.py that prints "Hello, world!".', True),
        ("Write hello.py that prints 'Hello' and then the name", False),  # more follows the quote
        ("Write hello.py to print 'Hello'", False),  # it printed more than that
    ],
)
def test_a_step_whose_description_gives_the_whole_output_is_settled_when_exactly_that_printed(
    description: str, settled: bool
) -> None:
    assert HELLO.settles("hello.py exists and `python hello.py` runs", description) is settled


def test_a_failed_command_shows_workspace_paths_as_typed_and_where_the_file_went(tmp_path: Path) -> None:
    """The 1.5B wrote src/hello.py for "`python hello.py` runs"; shown "can't open file '/tmp/…/ws/hello.py'", it
    wrote its next try under the workspace at that absolute path. The failure shows the path as the acceptance
    types it, and says where the step's file went."""
    (tmp_path / "src").mkdir()
    evidence = gather(
        step("`python hello.py` runs"),
        wrote(tmp_path, "src/hello.py", b"print('Hello, world!')\n"),
        workspace_tools(tmp_path),
    )
    reason = evidence.reason()
    assert str(tmp_path) not in reason and _evidence.sys.executable not in reason
    assert "can't open file 'hello.py'" in reason
    assert "the step wrote src/hello.py, but commands run in the workspace's top folder: write hello.py there" in (
        reason
    )


def test_a_test_file_pytest_cannot_find_says_where_the_step_wrote_it(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    test = b"def test_one():\n    assert 1 == 1\n"
    evidence = gather(
        step("`pytest test_one.py` passes"), wrote(tmp_path, "tests/test_one.py", test), workspace_tools(tmp_path)
    )
    assert "the step wrote tests/test_one.py, but commands run in the workspace's top folder" in evidence.reason()


def test_a_clause_that_says_what_prints_without_the_command_takes_the_command_before_it(tmp_path: Path) -> None:
    """The 1.5B's acceptance "hello.py exists and `python hello.py` runs and prints 'Hello, world!'": its last
    clause prints by the command of the clause before it, so the checks settle it (the judge, asked, failed the
    right file because "the expected content is 'print('Hello, world!')'"), and a silent script fails it."""
    acceptance = "hello.py exists and `python hello.py` runs and prints 'Hello, world!'"
    assert HELLO.settles(acceptance, "Write hello.py with the content 'Hello, world!'")
    assert not HELLO.settles("hello.py exists and `python hello.py` runs and prints 'Bye'")
    # no command before it: the acceptance's one script is what prints (its run printed the text)
    assert HELLO.settles("hello.py exists and prints 'Hello, world!'")
    assert not HELLO.settles("hello.py exists and prints 'Bye'")
    assert not HELLO.settles("hello.py and app.py exist and it prints 'Hello, world!'")  # two scripts: not said
    silent = gather(step(acceptance), wrote(tmp_path, "hello.py", b"x = 1\n"), workspace_tools(tmp_path))
    assert [c.what for c in silent.failed] == ["`python hello.py` runs"] and "printed nothing" in silent.reason()


@pytest.mark.parametrize(
    ("acceptance", "settled"),
    [
        ("data.csv exists and 'name,score' is the first row", True),  # the 1.5B's acceptance
        ("the first line of data.csv is 'name,score'", True),
        ("data.csv contains 'a,10'", True),
        ('data.csv has the header "name,score"', True),
        ("data.csv exists and 'a,10' is the first row", False),
        # the 1.5B's (readme_counter, round 10): its judge failed the right README.md five times
        ("data.csv exists and has 'name,score' as the first line", True),
        ("data.csv exists and has 'a,10' as the first line", False),
        ("data.csv contains 'b,20'", False),
        ("data.csv exists and has three rows", False),  # a clause no check decides: the judge's
        # the 1.5B's "words.txt exists and has the lines 'apple', 'banana', 'kiwi'": each quoted line is checked
        ("data.csv exists and has the lines 'name,score', 'a,10'", True),
        ("data.csv exists and has the lines 'name,score', 'b,20'", False),
    ],
)
def test_a_files_content_named_in_quotes_is_checked_without_a_model(
    tmp_path: Path, acceptance: str, settled: bool
) -> None:
    """The 1.5B's judge failed a data.csv whose first line was name,score four times ("it should contain
    'name,score' as the first row"). A clause that quotes what a file contains, or its first line, is checked on
    the file; a step whose every clause a check decides is settled without a judge, and a check that fails names
    what the file holds."""
    evidence = gather(step(acceptance), wrote(tmp_path, "data.csv", b"name,score\na,10\n"), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write data.csv") is settled
    assert bool(evidence.failed) is (not settled and "three rows" not in acceptance)
    if evidence.failed:
        assert "its first line is 'name,score'" in evidence.reason()
    assert "b,20" not in acceptance or [c.what for c in evidence.failed] == ["data.csv contains 'b,20'"]


@pytest.mark.parametrize(
    ("acceptance", "settled", "why"),
    [  # the 1.5B's acceptance; its judge failed the right data.csv four times ("the actual sum is 66")
        ("data.csv exists and the score column sums to 60", True, ""),
        ("the sum of the score column in data.csv is 60.0", True, ""),
        ("data.csv exists and the Score column adds up to 60", True, ""),
        ("data.csv exists and the score column sums to 50", False, "its score column sums to 60"),
        ("data.csv exists and the age column sums to 60", False, ""),  # no such column: the judge's
    ],
)
def test_a_csv_columns_sum_is_checked_without_a_model(tmp_path: Path, acceptance: str, settled: bool, why: str) -> None:
    body = b"name,score\nAlice,10\nBob,20\nCharlie,30\n"
    evidence = gather(step(acceptance), wrote(tmp_path, "data.csv", body), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write data.csv") is settled
    assert evidence.reason().endswith(why) and bool(evidence.failed) is bool(why)


def test_a_module_called_as_a_function_is_told_the_import_that_fixes_it(tmp_path: Path) -> None:
    """The 1.5B wrote `import greet` then `print(greet('Ada'))` three times, each failing with "'module' object is
    not callable": the failure names the fix."""
    (tmp_path / "greet.py").write_text("def greet(name):\n    return 'Hello, ' + name + '!'\n")
    main = b"import greet\nprint(greet('Ada'))\n"
    evidence = gather(step("`python main.py` runs"), wrote(tmp_path, "main.py", main), workspace_tools(tmp_path))
    assert "'module' object is not callable" in evidence.reason()
    assert "write `from greet import greet`" in evidence.reason()


def reason_of_run(ws: Path, script: str, source: bytes) -> str:
    """The failure reason of a step that wrote ``script`` and whose acceptance runs it."""
    return gather(step(f"`python {script}` runs"), wrote(ws, script, source), workspace_tools(ws)).reason()


def test_a_script_that_opens_a_path_that_is_not_there_is_told_what_the_workspace_holds(tmp_path: Path) -> None:
    """The 1.5B's greet_all.py listed the folder 'names' for the task's names.txt four times, each failing with
    FileNotFoundError: the failure names the file it most likely meant, or what the workspace holds."""
    (tmp_path / "names.txt").write_text("Ada\n")
    lister = b"import os\nfor n in os.listdir('names'):\n    print('Hi ' + n)\n"
    assert "Fix: there is no 'names' in the workspace; it holds names.txt" in reason_of_run(
        tmp_path, "greet.py", lister
    )
    opener = b"print(open('data/in.csv').read())\n"
    held = "Fix: there is no 'data/in.csv' in the workspace; it holds greet.py, names.txt, show.py"
    assert held in reason_of_run(tmp_path, "show.py", opener)


def test_a_script_that_lists_a_file_as_a_folder_is_told_to_open_it(tmp_path: Path) -> None:
    """The held-out biggest.py called ``os.listdir('numbers.txt')``: NotADirectoryError, with no fix named."""
    (tmp_path / "numbers.txt").write_text("3\n9\n4\n")
    lister = b"import os\nprint(max(int(n) for n in os.listdir('numbers.txt')))\n"
    told = "Fix: 'numbers.txt' is a file, not a folder: read it with `open('numbers.txt')`"
    assert told in reason_of_run(tmp_path, "big.py", lister)
    # a path under the file is not itself called a file
    assert "is a file, not a folder" not in reason_of_run(
        tmp_path, "big.py", b"import os\nos.listdir('numbers.txt/x')\n"
    )


@pytest.mark.parametrize(
    ("test", "told"),
    [  # the 0.5B's two tries: a bare assert, then a copy of add(); a test that fails is a failure, not "no tests"
        (b"from mathx import add\nassert add(2, 3) == 5\n", True),
        (b"def add(a, b): return a + b\n", True),
        (b"from mathx import add\ndef test_add():\n    assert add(2, 3) == 6\n", False),
    ],
)
def test_a_test_file_without_a_test_is_told_what_pytest_runs(tmp_path: Path, test: bytes, told: bool) -> None:
    (tmp_path / "mathx.py").write_text("def add(a, b):\n    return a + b\n")
    acceptance = "`pytest test_mathx.py` passes"
    evidence = gather(step(acceptance), wrote(tmp_path, "test_mathx.py", test), workspace_tools(tmp_path))
    assert evidence.failed and ("exit code 5" in evidence.reason()) is told
    assert ("functions whose names start with test_" in evidence.reason()) is told


@pytest.mark.parametrize(
    ("name", "content", "acceptance", "settled"),
    [  # the 1.5B's acceptance, and its judge failed the right config.json four times
        ("config.json", b'{"port": 8080}', "config.json exists and its content is {'port': 8080}", True),
        ("config.json", b'{"port": 8080}\n', 'config.json contains {"port": 8080}', True),
        ("config.json", b'{"port": 8080}', "config.json exists and its contents match {'port': 8080}", True),
        ("config.json", b'{"port": 8080}', "config.json's content is {'port': 8080}", True),
        ("config.json", b'{"port": 8080}', "`config.json` contents equal {'port': 8080}", True),
        ("config.json", b'{"port": 80}', "config.json exists and its contents match {'port': 8080}", False),
        ("scores.json", b"[3, 5, 7]", "scores.json exists and contains the list [3, 5, 7]", True),
        ("config.json", b'{"port": 80}', "config.json exists and its content is {'port': 8080}", False),
        ("scores.json", b"[3, 5]", "scores.json contains the list [3, 5, 7]", False),
        ("scores.json", b"not json", "scores.json contains [3, 5, 7]", False),
        ("config.json", b'{"port": 8080}', "config.json contains {'port': __import__('os')}", False),  # no value
    ],
)
def test_a_files_data_given_as_a_literal_is_compared_as_data(
    tmp_path: Path, name: str, content: bytes, acceptance: str, settled: bool
) -> None:
    evidence = gather(step(acceptance), wrote(tmp_path, name, content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, f"Write {name}") is settled


@pytest.mark.parametrize(
    ("name", "content", "acceptance", "settled", "failed"),
    [  # the 1.5B's acceptance; its judge failed the empty util/__init__.py four times ("it is not empty")
        ("util/__init__.py", b"", "util/__init__.py exists and is empty", True, False),
        ("util/__init__.py", b"\n", "util/__init__.py exists and is empty", True, False),
        ("util/__init__.py", b"x = 1\n", "util/__init__.py exists and is empty", False, True),
        # and a right util/strings.py, written on two lines, on this acceptance
        (
            "util/strings.py",
            b"def shout(s):\n    return s.upper() + '!'\n",
            "util/strings.py exists and contains `def shout(s): return s.upper() + '!'`",
            True,
            False,
        ),
        (  # written another way: not failed, left to the judge
            "util/strings.py",
            b"def shout(text):\n    return f'{text.upper()}!'\n",
            "util/strings.py exists and contains `def shout(s): return s.upper() + '!'`",
            False,
            False,
        ),
        (
            "app.py",
            b"from util.strings import shout\nprint(shout('hi'))\n",
            "app.py has `print(shout('hi'))`",
            True,
            False,
        ),
    ],
)
def test_an_empty_file_and_a_piece_of_code_are_checked_without_a_model(
    tmp_path: Path, name: str, content: bytes, acceptance: str, settled: bool, failed: bool
) -> None:
    """ "is empty" is checked on the file; code an acceptance quotes is looked for as parsed Python (layout aside),
    and code not found so is the judge's to read, not a failure."""
    (tmp_path / "util").mkdir()
    evidence = gather(step(acceptance), wrote(tmp_path, name, content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, f"Write {name}") is settled
    assert bool(evidence.failed) is failed
    if failed:
        assert evidence.reason() == "util/__init__.py is empty: it holds 'x = 1'"


@pytest.mark.parametrize(
    ("name", "description", "content", "settled"),
    [  # the 1.5B's steps, each failed by its judge on acceptance that said only "with the correct content"
        ("temps.txt", "Write temps.txt with the numbers 0 and 100, one per line", b"0\n100\n", True),
        ("temps.txt", "Write temps.txt with the numbers 0 and 100, one per line", b"0 100\n", False),
        (
            "words.txt",
            "Write words.txt with the words apple, banana and kiwi, one per line",
            b"apple\nbanana\nkiwi",
            True,
        ),
        ("words.txt", "Write words.txt with the words apple, banana and kiwi, one per line", b"apple\nkiwi\n", False),
        ("notes.txt", "Write notes.txt with exactly three lines of text", b"a\nb\nc\n", True),
        ("notes.txt", "Write notes.txt with exactly three lines of text", b"a\nb\n", False),
        ("README.md", "Write README.md whose first line is # Counter", b"# Counter\n\nText\n", True),
        ("README.md", "Write README.md whose first line is # Counter", b"Counter\n", False),
        ("data.csv", "Write data.csv with the header line name,score and three rows", b"name,score\na,1\n", True),
        ("scores.json", "Write scores.json containing the list [3, 5, 7]", b"[3, 5, 7]", True),
        ("scores.json", "Write scores.json containing the list [3, 5, 7]", b"[3, 5]", False),
        ("temps.txt", "Write temps.txt", b"0\n100\n", False),  # the description gives nothing to check
    ],
)
def test_a_data_file_with_vague_acceptance_is_checked_against_its_step_description(
    tmp_path: Path, name: str, description: str, content: bytes, settled: bool
) -> None:
    """A clause that only says the content is right ("temps.txt exists with the correct content") is decided by
    what the step's description gives the file, when all of that is checked and holds; what does not hold is not
    a failure (the description may be read wrong) but the judge's, shown what was found."""
    acceptance = f"{name} exists with the correct content"
    s = Step(id="s", description=description, tools=["write_file"], acceptance=acceptance)
    evidence = gather(s, wrote(tmp_path, name, content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, description) is settled
    assert not evidence.failed
    described = [c for c in evidence.checks if c.what.startswith("as the step describes: ")]
    assert bool(described) is (description != "Write temps.txt")
    # a clause that says what the content is, not only that it is right, is not overruled by the description
    exact = f"{name} exists and contains 'zzz'"
    s = Step(id="s", description=description, tools=["write_file"], acceptance=exact)
    assert not gather(s, wrote(tmp_path, name, content), workspace_tools(tmp_path)).settles(exact, description)


@pytest.mark.parametrize(
    ("acceptance", "content", "settled"),
    [
        ("notes.txt exists and contains exactly three lines", b"a\nb\nc\n", True),  # the 1.5B's acceptance
        ("notes.txt exists and contains exactly three lines", b"a\nb\nc\nd\n", False),
        ("notes.txt has 2 lines of text", b"a\nb", True),
        ("notes.txt exists with three lines of text", b"a\nb\nc", True),  # the 1.5B's; its judge failed it 3 times
        ("notes.txt exists with three lines of text", b"a\nb\nc\nd", False),
    ],
)
def test_how_many_lines_a_file_has_is_counted(tmp_path: Path, acceptance: str, content: bytes, settled: bool) -> None:
    evidence = gather(step(acceptance), wrote(tmp_path, "notes.txt", content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write notes.txt") is settled
    assert bool(evidence.failed) is (not settled)
    if not settled:
        assert "it has 4" in evidence.reason()


FIZZ = "1\n2\nFizz\n4\nBuzz\nFizz\n7\n8\nFizz\nBuzz\n11\nFizz\n13\n14\nFizzBuzz"


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (  # the 1.5B's judge on a right fizzbuzz.py: it then passed a wrong one
            f"The expected output should be:\n\n{FIZZ}\n\nInstead, the actual output is:\n\n"
            + "\n".join(str(i) for i in range(1, 16)),
            "the output the reason expects is what `python fizzbuzz.py` printed",
        ),
        ("the actual output is 1 2 3 4 5. It is wrong.", "`python fizzbuzz.py` printed '1 2 Fizz"),
        (f"the expected output is: {FIZZ.replace(chr(10), ' ')}, but it is not shown", "the output the reason"),
        ("the expected output should be 1 2 Fizz 4 Buzz, instead it stops", None),  # not what it printed
        ("the actual output is FizzBuzz. It should print more.", None),  # one word: not a misreading to name
        ("The output is wrong: FizzBuzz is missing", None),
    ],
)
def test_a_reason_that_misreads_what_a_command_printed_is_contradicted(reason: str, said: str | None) -> None:
    evidence = _evidence.Evidence(runs=[], files={}, checks=[_evidence.Check("`python fizzbuzz.py` runs", True, FIZZ)])
    got = evidence.refutes(reason, report_shown=False)
    assert got.startswith(said) if said else got == ""


@pytest.mark.parametrize(
    ("acceptance", "content", "settled", "failed"),
    [  # the 1.5B's acceptance; its judge failed a mathx.py that defined add ("not defined, as the errors show")
        ("The `add` function is defined in mathx.py", b"def add(a, b):\n    return a + b\n", True, False),
        ("mathx.py defines add(a, b)", b"def add(a, b):\n    return a + b\n", True, False),
        ("mathx.py has the function add", b"class add:\n    pass\n", True, False),
        ("The `add` function is defined in mathx.py", b"def plus(a, b):\n    return a + b\n", False, True),
        ("The `add` function is defined in mathx.py", b"def other():\n    def add(a, b):\n        pass\n", False, True),
        ("The `add` function is defined in mathx.py", b"def add(a, b) return a\n", False, True),
    ],
)
def test_a_function_an_acceptance_says_a_file_defines_is_looked_for(
    tmp_path: Path, acceptance: str, content: bytes, settled: bool, failed: bool
) -> None:
    evidence = gather(step(acceptance), wrote(tmp_path, "mathx.py", content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Add add to mathx.py") is settled
    assert bool(evidence.failed) is failed


@pytest.mark.parametrize(
    ("acceptance", "passing", "settled"),
    [  # the 1.5B's acceptance: its judge failed a test run that printed "1 passed"
        ("test_shapes.py exists and `pytest test_shapes.py` passes with `s = 3` returning `9`", True, True),
        ("test_shapes.py exists and `pytest test_shapes.py` passes with `s = 3` returning `9`", False, False),
        ("`python shapes_test.py` passes with s = 3", True, False),  # not a test run: the judge's
    ],
)
def test_a_test_run_that_passes_settles_its_clause_whatever_it_says_it_checks(
    tmp_path: Path, acceptance: str, passing: bool, settled: bool
) -> None:
    (tmp_path / "shapes.py").write_text("def area_square(s):\n    return s * s\n")
    body = b"from shapes import area_square\n\ndef test_a():\n    assert area_square(3) == " + (
        b"9" if passing else b"8"
    )
    name = "shapes_test.py" if "shapes_test" in acceptance else "test_shapes.py"
    evidence = gather(step(acceptance), wrote(tmp_path, name, body + b"\n"), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write the test") is settled
    assert bool(evidence.failed) is (not passing)


CALC = (
    b"def double(x):\n    return x * 2\n\ndef is_even(n):\n    return n % 2 == 0\n\ndef add(a, b):\n    return a + b\n"
)


@pytest.mark.parametrize(
    ("acceptance", "settled", "failed"),
    [
        ("calc.py exists and double(21) returns 42", True, None),  # the 1.5B's; its judge failed a right calc.py
        ("`double(21)` returns `42`", True, None),
        ("add(2, 3) == 5", True, None),  # the comma in the call is not a clause's end
        ("is_even(4) is True and is_even(3) is False", True, None),
        ("is_even(4) returns 1", False, "is_even(4) returns 1: is_even(4) returned True, not 1"),  # True is not 1
        ("double(21) returns 43", False, "double(21) returns 43: double(21) returned 42, not 43"),
        ("double('a', 'b') returns 1", False, "double('a', 'b') returns 1: it raised"),
        ("triple(2) returns 6", False, None),  # defined nowhere: not decided, the judge's
        ("double(x) returns twice x", False, None),  # not literals: not a call planmode makes
    ],
)
def test_a_call_an_acceptance_says_returns_a_value_is_made(
    tmp_path: Path, acceptance: str, settled: bool, failed: str | None
) -> None:
    """The 1.5B's judge failed a calc.py whose double(21) returned 42 on "calc.py exists and double(21) returns
    42". A clause that says what a call with literal arguments returns is a check: the one workspace module that
    defines the function is imported in a child process and the call made; the value settles the clause."""
    evidence = gather(step(acceptance), wrote(tmp_path, "calc.py", CALC), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Fix calc.py") is settled
    reasons = [f"{c.what}: {c.detail}" for c in evidence.failed]
    assert len(reasons) == (1 if failed else 0) and (not failed or reasons[0].startswith(failed))


def test_a_call_that_never_returns_or_prints_at_import_is_bounded_and_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_evidence, "COMMAND_TIMEOUT", 1.0)
    source = (
        b"print('loading')\ndef f(n):\n    print('noise')\n    return n + 1\ndef g():\n    while True:\n        pass\n"
    )
    evidence = gather(
        step("f(1) returns 2 and g() returns 0"), wrote(tmp_path, "m.py", source), workspace_tools(tmp_path)
    )
    by = {c.what: c for c in evidence.checks}
    assert by["f(1) returns 2"].passed is True  # what it printed is not what it returned
    assert by["g() returns 0"].passed is False and "still running" in by["g() returns 0"].detail


@pytest.mark.parametrize(
    ("acceptance", "settled", "failed"),
    [
        ("run.py prints '49' when executed", False, "`python run.py` prints '49': it printed '16', not '49'"),  # 1.5B
        ("run.py prints '16' when executed", True, None),
        ('run.py exists and `python run.py` outputs "16"', True, None),
        ("`python run.py` prints '1'", False, None),  # a part of what it printed: the judge's to read
        ("`python run.py` runs and prints '4 4'", False, "`python run.py` prints '4 4': it printed '16', not '4 4'"),
        (  # the 1.5B's repair step, whose judge passed a run.py printing nothing ("ran without errors and printed")
            "The `python run.py` command should run without errors and print `49`.",
            False,
            "`python run.py` prints '49': it printed '16', not '49'",
        ),
        ("The `python run.py` command should run without errors and print `16`.", True, None),
        # the 1.5B's hello.py acceptance: the printed text comes before any command; its judge failed the right file
        ("run.py exists and when executed, prints '16' and `python run.py` runs", True, None),
        (
            "run.py exists and when executed, prints '49'",
            False,
            "`python run.py` prints '49': it printed '16', not '49'",
        ),
    ],
)
def test_a_quoted_output_a_run_did_not_print_fails_the_step(
    tmp_path: Path, acceptance: str, settled: bool, failed: str | None
) -> None:
    """The 1.5B's judge passed a run.py that printed 16 on "run.py prints '49' when executed" ("it produced '49' as
    expected"). What a command is said to print is compared with what it printed: the same text settles the
    clause, a text that is no part of it fails the step, and a part is left to the judge."""
    evidence = gather(step(acceptance), wrote(tmp_path, "run.py", b"print(4 * 4)\n"), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write run.py") is settled
    assert [f"{c.what}: {c.detail}" for c in evidence.failed] == ([failed] if failed else [])


@pytest.mark.parametrize(
    ("script", "module", "named"),
    [
        (b"import sys\nprint(len(sys.stdin.readlines()))\n", None, False),  # the 1.5B's: printed 0, claimed done
        (b"print(len(open('notes.txt').read().splitlines()))\n", None, True),
        (
            b"from pathlib import Path\nprint(len((Path(__file__).parent / 'notes.txt').read_text().splitlines()))\n",
            None,
            True,
        ),
        (
            b"from counting import count\nprint(count())\n",
            b"def count():\n    return len(open('notes.txt').readlines())\n",
            True,
        ),
        (b"import counting\nprint(counting.count())\n", b"def count():\n    return 3\n", False),
    ],
)
def test_a_script_the_step_says_uses_a_workspace_file_must_name_it(
    tmp_path: Path, script: bytes, module: bytes | None, named: bool
) -> None:
    """The 1.5B's count_lines.py read standard input, ran (no input) and printed 0 for a three-line notes.txt; its
    judge passed it and the run ended `completed`. A script a step says uses a data file of the workspace must
    name it, or a workspace module it imports must: else the step fails, naming the fix, and no judge is asked."""
    (tmp_path / "notes.txt").write_text("a\nb\nc\n")
    if module is not None:
        (tmp_path / "counting.py").write_bytes(module)
    acceptance = "count_lines.py exists and runs successfully with the correct output"
    counted = "words" if "words" in acceptance else "lines"  # the step's description says what it counts too
    s = Step(
        id="s",
        description=f"Write count_lines.py that prints the number of {counted} in notes.txt",
        tools=["write_file"],
        acceptance=acceptance,
    )
    evidence = gather(s, wrote(tmp_path, "count_lines.py", script), workspace_tools(tmp_path))
    check = next(c for c in evidence.checks if c.what == "count_lines.py opens notes.txt")
    assert check.passed is named
    if not named:
        assert evidence.failed == [check] and "open 'notes.txt' in count_lines.py" in evidence.reason()
        assert not evidence.settles(acceptance, s.description)
    else:
        assert not evidence.failed


def test_a_data_file_the_step_names_that_does_not_exist_or_a_module_it_names_is_not_asked_for(tmp_path: Path) -> None:
    """Only data files that exist in the workspace are inputs: a file the script is to write (out.csv), and a
    Python module (greet.py), are not looked for in it."""
    (tmp_path / "greet.py").write_text("def greet(n):\n    return n\n")
    s = Step(
        id="s",
        description="Write main.py that imports greet.py and writes out.csv",
        tools=["write_file"],
        acceptance="`python main.py` runs",
    )
    evidence = gather(s, wrote(tmp_path, "main.py", b"print(1)\n"), workspace_tools(tmp_path))
    assert not any(" opens " in c.what for c in evidence.checks) and not evidence.failed


@pytest.mark.parametrize(
    ("content", "acceptance", "settled"),
    [  # the 1.5B's acceptance (its "\\n" read by JSON as a line break); its judge failed the right file four times
        (b"0\n100", "temps.txt exists and `cat temps.txt` outputs `0\n100`", True),
        (b"0\n100\n", "temps.txt exists and `cat temps.txt` outputs `0\\n100`", True),  # written out
        (b"0\n100\n", "running `cat temps.txt` prints '0\n100'", True),
        (b"0 100\n", "temps.txt exists and `cat temps.txt` outputs `0\n100`", False),
        (b"0\n100\n200\n", "`cat temps.txt` outputs `0\n100`", False),
        (b"100\n0\n", "`cat temps.txt` outputs `0\n100`", False),
        (b"0\n100", "temps.txt exists and `cat temps.txt` outputs: 0\n100", True),  # the lines after a colon
        (b"0\n100\n", "`cat temps.txt` outputs exactly:\n0\n100", True),
        (b"0\n", "temps.txt exists and `cat temps.txt` outputs: 0\n100", False),
    ],
)
def test_what_cat_prints_of_a_file_is_checked_on_its_text_without_a_command(
    tmp_path: Path, content: bytes, acceptance: str, settled: bool
) -> None:
    """A clause that says what `cat` prints of a file is a check of the file's whole text, line by line: nothing
    runs, and the step is settled without a judge when the text is right; a wrong text fails, naming what it
    reads."""
    evidence = gather(step(acceptance), wrote(tmp_path, "temps.txt", content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write temps.txt with 0 and 100, one per line") is settled
    assert bool(evidence.failed) is (not settled)
    if not settled:
        assert evidence.reason().startswith("temps.txt reads '0") and "it reads" in evidence.reason()
    assert not any(c.what.startswith("`cat") for c in evidence.checks)  # no command was run for it


@pytest.mark.parametrize(
    "app",
    [
        b"import util\nprint(util.shout('hi'))\n",  # the 1.5B's app.py
        b"print(shout('hi'))\n",
        b"from util import shout\nprint(shout('hi'))\n",
    ],
)
def test_a_name_defined_in_another_workspace_module_is_told_its_import(tmp_path: Path, app: bytes) -> None:
    (tmp_path / "util").mkdir()
    (tmp_path / "util" / "__init__.py").write_text("")
    (tmp_path / "util" / "strings.py").write_text("def shout(s):\n    return s.upper() + '!'\n")
    evidence = gather(step("`python app.py` runs"), wrote(tmp_path, "app.py", app), workspace_tools(tmp_path))
    assert "Fix: shout is defined in the module util.strings: write `from util.strings import shout`" in (
        evidence.reason()
    )


def test_a_name_defined_nowhere_or_twice_gets_no_import_hint(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def shout(s):\n    return s\n")
    (tmp_path / "b.py").write_text("def shout(s):\n    return s\n")
    for app in (b"print(shout('hi'))\n", b"print(whisper('hi'))\n"):
        evidence = gather(step("`python app.py` runs"), wrote(tmp_path, "app.py", app), workspace_tools(tmp_path))
        assert "is not defined" in evidence.reason() and "Fix:" not in evidence.reason()


def test_a_reason_that_the_command_did_not_run_is_contradicted_by_a_check_that_ran_it() -> None:
    """The 1.5B's judge failed a right total.py because "the step did not execute the `python total.py` command",
    beside the check that ran it. A reason that it ran badly is a judgement, not a contradiction."""
    ran = _evidence.Evidence(runs=[], checks=[_evidence.Check("`python total.py` runs", True, "15")])
    said = "The outcome did not meet the acceptance criteria. The step did not execute the `python total.py` command."
    assert ran.refutes(said, report_shown=False) == "the checks ran it: `python total.py` runs: passed"
    assert ran.refutes("total.py was not run", report_shown=False)
    assert ran.refutes("total.py does not run correctly: it prints 14", report_shown=False) == ""
    assert _evidence.Evidence(runs=[], checks=[]).refutes(said, report_shown=False) == ""


@pytest.mark.parametrize(
    ("reason", "same"),
    [
        ("The check failed because the output was `16` instead of `16`.", "16"),  # the 1.5B's judge on shapes.py
        ("expected 'cba' but got 'cba'", "cba"),
        ("the output was `16` instead of `15`.", None),
        ("expected 'abc' but got 'cba'", None),
        ("it prints 2 3 5 one per line, not on one line", None),
        ("cats, not cats", None),  # unquoted words: not read
    ],
)
def test_a_reason_that_expects_what_is_there_is_contradicted(reason: str, same: str | None) -> None:
    refuted = HELLO.refutes(reason, report_shown=False)
    if same is None:
        assert refuted == ""
    else:
        assert refuted == f"the reason gives {same!r} as both what is expected and what is there"


@pytest.mark.parametrize(
    ("content", "settled"),
    [(b"0\n100\n", True), (b"0\n10\n", False), (b"100\n", False), (b"0.5\n100\n", False)],
)
def test_numbers_a_file_contains_are_checked_as_numbers(tmp_path: Path, content: bytes, settled: bool) -> None:
    """The 1.5B's judge failed a right temps.txt on "temps.txt exists and contains 0 and 100" four times in the
    run after the last fixes ("temps.txt does not exist", asked again, the same). Numbers a file is said to
    contain are checked as whole numbers (10 is not in 100, 0 is not in 0.5)."""
    acceptance = "temps.txt exists and contains 0 and 100"
    evidence = gather(step(acceptance), wrote(tmp_path, "temps.txt", content), workspace_tools(tmp_path))
    assert evidence.covers(acceptance) is settled and evidence.settles(acceptance, "Write temps.txt") is settled


def test_a_name_imported_from_a_module_that_is_not_there_is_told_its_module(tmp_path: Path) -> None:
    """The 1.5B's test_primes.py imported is_prime "from your_module": "No module named 'your_module'"."""
    (tmp_path / "primes.py").write_text("def is_prime(n):\n    return n in (2, 3, 5, 7)\n")
    test = b"from your_module import is_prime\n\ndef test_seven():\n    assert is_prime(7)\n"
    evidence = gather(step("`python t.py` runs"), wrote(tmp_path, "t.py", test), workspace_tools(tmp_path))
    assert "Fix: is_prime is defined in the module primes: write `from primes import is_prime`" in evidence.reason()


@pytest.mark.parametrize(
    ("reason", "contradicted"),
    [
        # the 1.5B's judge on a right util/strings.py, twice
        ("The file `util/strings.py` does not contain the `shout` function as described by the step.", True),
        ("the function `shout` is not defined", True),
        ("does not define shout()", True),
        ("The file util/strings.py exists but does not contain the expected function shout.", True),  # the 1.5B's
        ("does not contain the whisper function", False),  # defined nowhere: a judgement, not contradicted
        ("does not contain the expected output", False),
        ("The file does not contain the missing '!' at the end.", False),
    ],
)
def test_a_reason_that_a_function_is_missing_is_contradicted_where_a_file_defines_it(
    reason: str, contradicted: bool
) -> None:
    evidence = _evidence.Evidence(
        runs=[],
        files={"util/strings.py": "def shout(s):\n    return s.upper() + '!'\n"},
        checks=[_evidence.Check("util/strings.py exists", True)],
    )
    said = evidence.refutes(reason, report_shown=False)
    assert bool(said) == contradicted
    if contradicted:
        assert said == "util/strings.py defines shout"


GREET = "def greet(name):\n    return 'Hello, ' + name + '!'\nif __name__ == '__main__':\n    print(greet('Ada'))\n"


@pytest.mark.parametrize(
    ("reason", "contradicted"),
    [  # the 1.5B's judge on a right greet.py, twice; then what a judgement of the content says
        ("The content of 'greet.py' does not match the expected content: '" + GREET.replace("\n", "\\n") + "'", True),
        (
            "The step wrote '" + GREET.rstrip() + "', but the file only contains 'def greet(name):\n"
            "    return 'Hello, ' + name + '!'",
            True,
        ),
        ("greet.py does not match the task: it should return 'Hi, ' + name", False),
        ("The file holds '" + GREET + "' and prints Hello, Ada!", False),  # quotes it without a mismatch
    ],
)
def test_a_reason_that_quotes_the_files_whole_content_as_not_matching_is_contradicted(
    reason: str, contradicted: bool
) -> None:
    evidence = _evidence.Evidence(runs=[], files={"greet.py": GREET}, checks=[_evidence.Check("greet.py exists", True)])
    said = evidence.refutes(reason, report_shown=False)
    assert bool(said) == contradicted, said
    if contradicted:
        assert said == "the reason quotes greet.py as it is: that is the file's whole content"


def test_a_reason_that_misquotes_a_one_number_output_is_contradicted_and_its_but_clause_is_not_output() -> None:
    """The 1.5B's judge failed a right run.py (it printed 16) on "The expected output was 16, but the actual output
    was 64." A one-number output the reason gives wrongly is contradicted; what follows "but" is not output."""
    ran = _evidence.Evidence(
        runs=[], files={"run.py": "print(16)\n"}, checks=[_evidence.Check("`python run.py` runs", True, "16")]
    )
    said = "The script printed 16 as expected. The expected output was 16, but the actual output was 64."
    assert ran.refutes(said, report_shown=False) == "`python run.py` printed '16', not '64'"
    assert ran.refutes("The actual output was 16, but the step asks for 17.", report_shown=False) == ""
    assert ran.refutes("The actual output was 16 while 17 is asked for.", report_shown=False) == ""


@pytest.mark.parametrize(
    ("reason", "contradicted"),
    [  # the 1.5B's judge on a README.md whose first line is # Counter, beside the check that passed on it
        ("The first line of README.md is '# Counter', which does not match the acceptance criteria.", True),
        ("the first line of README.md is  '# Counter' and the title is not present", True),
        ("The first line of README.md is '# Count', not '# Counter'.", False),
        ("README.md has no second line describing counter.py", False),
    ],
)
def test_a_reason_that_states_a_passed_check_as_its_ground_is_contradicted(reason: str, contradicted: bool) -> None:
    evidence = _evidence.Evidence(
        runs=[],
        files={"README.md": "# Counter\n"},
        checks=[_evidence.Check("as the task says: the first line of README.md is '# Counter'", True)],
    )
    said = evidence.refutes(reason, report_shown=False)
    assert bool(said) == contradicted, said


@pytest.mark.parametrize(
    ("content", "acceptance", "settled", "why"),
    [  # the 1.5B's acceptance; its judge failed the right config.json four times ("config.json does not exist")
        (b'{"port": 8080}', "config.json exists and its port is 8080", True, ""),
        (b'{"port": 80}', "config.json exists and its port is 8080", False, "its port is 80"),
        (b'{"port": "8080"}', "config.json exists and its port is 8080", False, 'its port is "8080"'),  # text
        (b'{"port": 8080}', "config.json's port is '8080'", True, ""),  # quoted: the number written so matches
        (b'{"server": {"Port": 8080}}', "the port in config.json is set to 8080", True, ""),  # nested, any case
        (b'{"host": "x"}', "config.json has the key port set to 8080", False, "it has no key 'port'"),
        (b"port = 8080", 'config.json contains "port": 8080', False, "it is not JSON data"),
        (b'{"port": true}', "the file config.json has port 1", False, "its port is true"),  # True is not 1
        (b'{"port": 8080}', "config.json exists and the port is correct", False, ""),  # no value: the judge's
    ],
)
def test_a_key_of_a_json_file_and_its_value_are_checked_as_data(
    tmp_path: Path, content: bytes, acceptance: str, settled: bool, why: str
) -> None:
    evidence = gather(step(acceptance), wrote(tmp_path, "config.json", content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write config.json") is settled
    assert evidence.reason().endswith(why) and bool(evidence.failed) is bool(why)


def test_a_key_clause_of_a_file_that_is_not_json_is_the_judges(tmp_path: Path) -> None:
    acceptance = "notes.txt exists and its port is 8080"
    evidence = gather(step(acceptance), wrote(tmp_path, "notes.txt", b"port 8080\n"), workspace_tools(tmp_path))
    assert not evidence.settles(acceptance, "Write notes.txt") and not evidence.failed


@pytest.mark.parametrize(
    ("acceptance", "script", "settled", "why"),
    [  # the 1.5B's acceptance; its judge failed the right count_lines.py ("the output is 3 lines, but ...")
        (
            "count_lines.py exists and `python count_lines.py` outputs the number of lines in notes.txt",
            b"print(len(open('notes.txt').read().splitlines()))\n",
            True,
            "",
        ),
        (
            "count_lines.py prints the number of lines in notes.txt",
            b"print(len(open('notes.txt').read().split()))\n",  # words, not lines
            False,
            "notes.txt has 3 lines; it printed 6",
        ),
        (
            "`python count_lines.py` prints how many words notes.txt has",
            b"print(len(open('notes.txt').read().split()))\n",
            True,
            "",
        ),
        (  # the 1.5B's next acceptance; its judge failed the right script on "the actual output is 0" twice
            "count_lines.py exists and correctly counts the lines in notes.txt and `python count_lines.py` runs",
            b"print(len(open('notes.txt').readlines()))\n",
            True,
            "",
        ),
        (  # the 1.5B's (final-code re-run): "when run" stood alone between commas, and its judge failed the
            # right script twice after every check passed ("it printed: 0")
            "count_lines.py exists and when run, prints the number of lines in notes.txt and `python count_lines.py`"
            " runs",
            b"print(len(open('notes.txt').readlines()))\n",
            True,
            "",
        ),
        (
            "count_lines.py exists and, when it is run, prints the number of lines in notes.txt",
            b"print(len(open('notes.txt').read().split()))\n",
            False,
            "notes.txt has 3 lines; it printed 6",
        ),
        (  # the step's description says what it prints: the count is checked whatever the acceptance says
            "count_lines.py exists and `python count_lines.py` runs",
            b"print(len(open('notes.txt').read()))\n",
            False,
            "notes.txt has 3 lines; it printed 28",
        ),
        (  # not one number: not counted here (the check of a value printed with words around it fails it)
            "count_lines.py prints the number of lines in notes.txt",
            b"n = len(open('notes.txt').readlines())\nprint(f'{n} lines')\n",
            False,
            "print just the value ('3'), not words around it",
        ),
    ],
)
def test_a_count_of_a_data_file_a_script_prints_is_counted_without_a_model(
    tmp_path: Path, acceptance: str, script: bytes, settled: bool, why: str
) -> None:
    (tmp_path / "notes.txt").write_text("one two\nthree four\nfive six\n")
    counted = "words" if "words" in acceptance else "lines"  # the step's description says what it counts too
    s = Step(
        id="s",
        description=f"Write count_lines.py that prints the number of {counted} in notes.txt",
        tools=["write_file"],
        acceptance=acceptance,
    )
    evidence = gather(s, wrote(tmp_path, "count_lines.py", script), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, s.description) is settled
    assert evidence.reason().endswith(why) and bool(evidence.failed) is bool(why)


@pytest.mark.parametrize(
    ("goal", "name", "code", "passed", "why"),
    [
        (  # the 1.5B's judge failed the right convert.py ("does not match the step's description")
            "Create convert.py with a function c_to_f(c) that returns c * 9 / 5 + 32. Create temps.txt.",
            "convert.py",
            b"def c_to_f(c):\n    return c * 9 / 5 + 32\n",
            True,
            "",
        ),
        (
            "Create convert.py with a function c_to_f(c) that returns c * 9 / 5 + 32. Create temps.txt.",
            "convert.py",
            b"def c_to_f(c):\n    return c * 9 / 5\n",
            False,
            "c_to_f(3) returned 5.4; c * 9 / 5 + 32 gives 37.4: make it return c * 9 / 5 + 32",
        ),
        (  # texts: the expression does not add a number to a text, so texts are tried
            "Create greet.py with a function greet(name) that returns 'Hello, ' + name + '!', and main.py",
            "greet.py",
            b"def greet(name):\n    return f'Hello, {name}!'\n",
            True,
            "",
        ),
        (
            "Create greet.py with a function greet(name) that returns 'Hello, ' + name + '!', and main.py",
            "greet.py",
            b"def greet(name):\n    print('Hello, ' + name + '!')\n",
            False,
            "greet('abc') returned None; 'Hello, ' + name + '!' gives 'Hello, abc!': make it return 'Hello, ' + name"
            " + '!'",
        ),
        (  # the fix_double task: the bug is found without a model
            "calc.py has a bug: double(x) should return x * 2. Fix it, then write check.py",
            "calc.py",
            b"def double(x):\n    return x + 2\n",
            False,
            "double(3) returned 5; x * 2 gives 6: make it return x * 2",
        ),
        (
            "Create mathx.py with a function add(a, b) that returns a + b, and test_mathx.py",
            "mathx.py",
            b"def add(a, b):\n    return int(a) + int(b)\n",
            True,
            "",
        ),
        (
            "Create mathx.py with a function add(a, b) that returns a + b, and test_mathx.py",
            "mathx.py",
            b"def add(a, b):\n    raise ValueError('no')\n",
            False,
            "add(3, 4) raised ValueError: no",
        ),
    ],
)
def test_a_function_the_task_defines_by_an_expression_is_called_and_compared(
    tmp_path: Path, goal: str, name: str, code: bytes, passed: bool, why: str
) -> None:
    s = Step(id="s", description=f"Write {name}", tools=["write_file"], acceptance=f"{name} exists")
    evidence = gather(s, wrote(tmp_path, name, code), workspace_tools(tmp_path), goal=goal)
    checks = [c for c in evidence.checks if c.what.startswith("as the task says: ")]
    assert len(checks) == 1 and checks[0].passed is passed
    assert checks[0].detail == why


def test_a_function_in_a_package_module_is_imported_by_its_package_path(tmp_path: Path) -> None:
    (tmp_path / "util").mkdir()
    (tmp_path / "util" / "__init__.py").write_text("")
    goal = "Create util/strings.py with a function shout(s) that returns s.upper() + '!'."
    s = Step(id="s", description="Write util/strings.py", tools=["write_file"], acceptance="util/strings.py exists")
    code = b"def shout(s):\n    return s.upper() + '!'\n"
    evidence = gather(s, wrote(tmp_path, "util/strings.py", code), workspace_tools(tmp_path), goal=goal)
    assert [c.passed for c in evidence.checks if c.what.startswith("as the task says: shout(s)")] == [True]


@pytest.mark.parametrize(
    "goal",
    [
        "Write rev.py with a function reverse(s) that returns the string s reversed",  # words, not an expression
        "Write f.py with a function f(x) that returns __import__('os').getcwd()",  # a name that is not a parameter
        "Write f.py with a function f(x) that returns x.__class__",  # a private attribute
        "Write f.py with a function f(x) that returns (lambda: x)()",
        "Write f.py with a function g(x) that returns x + 1",  # f.py does not define g
    ],
)
def test_a_function_the_task_does_not_define_by_a_plain_expression_is_not_called(tmp_path: Path, goal: str) -> None:
    marker = tmp_path / "called"
    code = f"def f(x):\n    open({str(marker)!r}, 'w').close()\n    return x\n\n\ndef reverse(s):\n    return s\n"
    s = Step(id="s", description="Write f.py", tools=["write_file"], acceptance="f.py exists")
    evidence = gather(s, wrote(tmp_path, "f.py", code.encode()), workspace_tools(tmp_path), goal=goal)
    assert not [c for c in evidence.checks if c.what.startswith("as the task says: ")]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("content", "acceptance", "settled"),
    [  # the 1.5B's (held-out `biggest`): its judge failed the right numbers.txt five times ("does not exist")
        (b"4\n9\n2", "numbers.txt exists and contains '4\n9\n2'", True),
        (b"4\n9\n2\n", "numbers.txt exists and contains '4\n9\n2'", True),
        (b"x\n4\n9\n2\ny\n", "numbers.txt contains '4\\n9\\n2'", True),  # written out, among other lines
        (b"4 9 2\n", "numbers.txt exists and contains '4\n9\n2'", False),
        (b"4\n2\n9\n", "numbers.txt exists and contains '4\n9\n2'", False),
    ],
)
def test_a_quoted_text_of_several_lines_a_file_contains_is_looked_for_line_by_line(
    tmp_path: Path, content: bytes, acceptance: str, settled: bool
) -> None:
    evidence = gather(step(acceptance), wrote(tmp_path, "numbers.txt", content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write numbers.txt") is settled
    assert bool(evidence.failed) is (not settled)


@pytest.mark.parametrize(
    ("content", "settled"),
    [  # the 1.5B's (held-out `person_name`): the right person.json failed on its Python notation twice
        (b'{"name": "Ada", "age": 36}', True),
        (b'{"age": 36, "name": "Ada"}\n', True),
        (b'{"name": "Ada", "age": 37}', False),
        (b"name: Ada, age: 36", False),
    ],
)
def test_data_cat_is_said_to_print_in_another_notation_is_compared_as_data(
    tmp_path: Path, content: bytes, settled: bool
) -> None:
    acceptance = "person.json exists and `cat person.json` outputs `{'name': 'Ada', 'age': 36}`"
    evidence = gather(step(acceptance), wrote(tmp_path, "person.json", content), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write person.json") is settled
    assert bool(evidence.failed) is (not settled)


@pytest.mark.parametrize(
    ("goal", "script", "printed", "why"),
    [  # the 1.5B's judge passed this evens.py (held-out `evens`); the run failed later, on another step
        (
            "Write evens.py that prints the even numbers from 2 to 10 on one line, separated by commas.",
            b"print(2, 4, 6, 8, 10)\n",
            False,
            "it printed '2 4 6 8 10': the items are to be separated by commas",
        ),
        (
            "Write evens.py that prints the even numbers from 2 to 10 on one line, separated by commas.",
            b"print(','.join(str(n) for n in range(2, 11, 2)))\n",
            True,
            "",
        ),
        (
            "Write evens.py that prints the numbers 1 to 5 on one line separated by spaces.",
            b"print(*range(1, 6), sep='\\n')\n",
            False,
            "it printed 5 lines: the items are to be on one line",
        ),
        (
            "Write evens.py that prints the numbers 1 to 5 on one line separated by spaces.",
            b"print(', '.join(map(str, range(1, 6))))\n",
            False,
            "it printed '1, 2, 3, 4, 5': the items are to be separated by spaces, without commas",
        ),
        (
            "Write evens.py that prints the numbers from 1 to 3, one per line.",
            b"print(1, 2, 3)\n",
            False,
            "it printed '1 2 3' on one line: the items are to be one per line",
        ),
        (
            "Write evens.py that prints the numbers from 1 to 3, one per line.",
            b"print(1)\nprint(2)\nprint(3)\n",
            True,
            "",
        ),
        ("Write evens.py that prints Hello, world!", b"print('Hello, world!')\n", True, ""),  # no layout given
    ],
)
def test_a_script_that_prints_in_another_layout_than_the_task_gives_fails(
    tmp_path: Path, goal: str, script: bytes, printed: bool, why: str
) -> None:
    s = Step(id="s", description=goal, tools=["write_file"], acceptance="`python evens.py` runs")
    evidence = gather(s, wrote(tmp_path, "evens.py", script), workspace_tools(tmp_path), goal=goal)
    run = next(c for c in evidence.checks if c.what == "`python evens.py` runs")
    assert run.passed is printed
    if not printed:
        assert run.detail == why


@pytest.mark.parametrize(
    ("acceptance", "settled"),
    [  # the 1.5B's (held-out `word_count`): its judge failed the right poem.txt four times on it
        ("poem.txt exists and 'cat sat on the mat' is in it", True),
        ("'the cat sat' is in poem.txt", True),
        ("poem.txt exists and 'a dog' is in it", False),
    ],
)
def test_a_quoted_text_said_to_be_in_a_file_is_looked_for(tmp_path: Path, acceptance: str, settled: bool) -> None:
    evidence = gather(
        step(acceptance), wrote(tmp_path, "poem.txt", b"the cat sat on the mat\n"), workspace_tools(tmp_path)
    )
    assert evidence.settles(acceptance, "Write poem.txt") is settled
    assert bool(evidence.failed) is (not settled)


def test_a_reason_that_a_file_does_not_contain_what_it_contains_is_contradicted(tmp_path: Path) -> None:
    acceptance = "poem.txt exists"
    evidence = gather(
        step(acceptance), wrote(tmp_path, "poem.txt", b"the cat sat on the mat\n"), workspace_tools(tmp_path)
    )
    assert "poem.txt contains 'cat sat on the mat'" in evidence.refutes(
        "The poem.txt file does not contain 'cat sat on the mat'.", report_shown=False
    )
    assert evidence.refutes("The poem.txt file does not contain 'a dog'.", report_shown=False) == ""


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"name": "Ada"', "line 1 column 15: Expecting ',' delimiter"),  # the person.json a misread call wrote
        (b"{'name': 'Ada'}", "line 1 column 2: Expecting property name enclosed in double quotes"),
        (b"", "it is empty"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"name": "Ada", "age": 36}\n', ""),
    ],
)
def test_a_json_file_the_step_wrote_is_checked_to_be_json(tmp_path: Path, content: bytes, why: str) -> None:
    """A truncated person.json passed "person.json exists", and the judge passed it; the next step's script then
    failed on it with JSONDecodeError and that step was blamed. A JSON file a step writes must be JSON."""
    evidence = gather(step("person.json exists"), wrote(tmp_path, "person.json", content), workspace_tools(tmp_path))
    parsed = [c for c in evidence.checks if c.what == "person.json is valid JSON"]
    assert [c.passed for c in parsed] == [not why]
    assert why in parsed[0].detail and bool(evidence.failed) is bool(why)


def test_a_printed_call_is_made_by_its_module_path_and_hostile_text_does_not_hang(tmp_path: Path) -> None:
    """ "prints the result of util.strings.shout('hi')": the call is made on that module; a call with arguments that
    are not literals is not made; text of 450,000 characters of open brackets is read in linear time."""
    (tmp_path / "util").mkdir()
    (tmp_path / "util" / "__init__.py").write_text("")
    (tmp_path / "util" / "strings.py").write_text("def shout(s):\n    return s.upper() + '!'\n")
    said = "app.py prints the result of util.strings.shout('hi')"
    right = _evidence._printed_call(said, "HI!\n", "app.py", tmp_path)
    assert right is not None and right.passed is True and right.detail == "HI!"
    wrong = _evidence._printed_call(said, "hi", "app.py", tmp_path)
    assert wrong is not None and wrong.passed is False and "gives 'HI!'" in wrong.detail
    assert _evidence._printed_call("app.py prints shout(line)", "HI!", "app.py", tmp_path) is None
    started = time.monotonic()
    for hostile in ("prints f(" * 50_000, "prints f('" * 50_000, "prints " + "a." * 100_000 + "b(1)"):
        assert _evidence._printed_call(hostile, "3", "app.py", tmp_path) is None
    assert time.monotonic() - started < 30  # a hang, not a measure of speed


@pytest.mark.parametrize(
    ("acceptance", "settled"),
    [
        ("double(x) returns x * 2 in calc.py", True),  # the 1.5B's; its judge failed the right calc.py
        ("calc.py exists and double(x) returns x*2", True),  # the same expression, written otherwise
        ("double(x) returns x + 2 in calc.py", False),  # not what the check found: the judge's
        ("double(x) returns twice x", False),  # words, not an expression: the judge's
    ],
)
def test_a_clause_that_a_functions_check_decides_settles_the_step(
    tmp_path: Path, acceptance: str, settled: bool
) -> None:
    """A calc.py whose double(x) returned x * 2, with a stale ``return x + 2`` left after it: the task's check of
    double passed, and the judge failed it ("still returns x + 2"); the 1.5B then edited calc.py until it broke. A
    clause that says what that passed check found is decided by it."""
    source = b"def double(x):\n    return x * 2\n    return x + 2\n"
    task = "calc.py has a bug: double(x) should return x * 2. Fix it."
    evidence = gather(step(acceptance), wrote(tmp_path, "calc.py", source), workspace_tools(tmp_path), goal=task)
    assert _evidence.Check("as the task says: double(x) returns x * 2", True) in evidence.checks
    assert evidence.settles(acceptance, "Fix double in calc.py") is settled


@pytest.mark.parametrize(
    ("description", "only"),
    [
        ("Create strings.py file in the util directory", True),
        ("Create util/__init__.py (it may be empty)", True),
        ("Create an empty file notes.txt", True),
        ("Write hello.py", False),  # "write" asks for content: the judge reads it against the task
        ("Create mathx.py with add(a, b)", False),
        ("Create util package directory and empty __init__.py file", False),  # "util" is a word left over
        ("Create README.md whose first line is # Counter", False),
        ("Create it", False),  # no file
    ],
)
def test_a_description_that_only_creates_files_is_told_from_one_that_asks_for_content(
    description: str, only: bool
) -> None:
    assert _evidence.only_creates(description) is only


@pytest.mark.parametrize(
    ("acceptance", "settled", "failed"),
    [
        ("words.txt exists and `cat words.txt` shows apple banana kiwi", True, False),  # the 1.5B's
        ("`cat words.txt` prints apple, banana and kiwi", False, False),  # cut into clauses at the commas: judged
        ("`cat words.txt` shows banana apple kiwi", False, False),  # another order: the judge's, not a failure
        ("`cat words.txt` shows the three fruits", False, False),  # words about the file: the judge's
    ],
)
def test_a_cat_clause_with_bare_words_is_decided_only_when_they_are_the_files_words(
    tmp_path: Path, acceptance: str, settled: bool, failed: bool
) -> None:
    """The 1.5B's judge failed a right words.txt ("apple\\nbanana\\nkiwi") five times on "`cat words.txt` shows
    apple banana kiwi" ("the content does not match"). Words not quoted are the file's words, in order, or left to
    the judge: never a failure of their own."""
    evidence = gather(step(acceptance), wrote(tmp_path, "words.txt", b"apple\nbanana\nkiwi"), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write words.txt with apple, banana and kiwi, one per line") is settled
    assert bool(evidence.failed) is failed


def test_a_module_used_without_its_import_is_told_the_import(tmp_path: Path) -> None:
    """The 1.5B's test_mathx.py called ``pytest.approx`` without ``import pytest`` (NameError); a name that is not
    used as a module (``code`` alone) is not told to be imported."""
    source = b"def check():\n    return pytest.approx(1.0) == 1.0\nprint(check())\n"
    assert "Fix: pytest is a module: write `import pytest` at the top of the file" in reason_of_run(
        tmp_path, "t.py", source
    )
    assert "is a module" not in reason_of_run(tmp_path, "u.py", b"print(code + 1)\n")


@pytest.mark.parametrize(
    ("source", "settled", "failed"),
    [
        (b"print(16)\n", True, False),  # the 1.5B's run.py; its judge failed it twice on "prints 16"
        (b"print(17)\n", False, True),  # another number: failed, no judge needed
        (b"print('area:', 16)\n", False, False),  # the number and more: the judge's
    ],
)
def test_a_number_a_command_prints_is_read_unquoted(tmp_path: Path, source: bytes, settled: bool, failed: bool) -> None:
    acceptance = "run.py exists and `python run.py` prints 16"
    evidence = gather(step(acceptance), wrote(tmp_path, "run.py", source), workspace_tools(tmp_path))
    assert evidence.settles(acceptance, "Write run.py that prints area_square(4)") is settled
    assert bool(evidence.failed) is failed
