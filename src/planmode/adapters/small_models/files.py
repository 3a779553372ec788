"""What a task or a step asks for, read from its English: the small-model adapter's file readers.

The core never reads these: which files a step produces is declared by its file checks
(`planmode.state.checks.declared_files`). With the adapter on (``model_profile="small"``) they add, for plans
that declare no files, the guesses small models need: the files a task only reads (`given_files`), the file a
step writes (`produced_file`), whether a step says its file is empty (`says_file_empty`), and the files done
steps produced (`done_files`).
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from planmode.tools.files import FILE_NAME as _FILE
from planmode.tools.files import file_names

if TYPE_CHECKING:
    from planmode.state.models import Plan, Step

__all__ = [
    "changed_files",
    "deliverables",
    "done_files",
    "file_mentions",
    "file_names",
    "given_files",
    "produced_file",
    "says_file_empty",
]

#: Words before a file name that make it an input or a file to remove, not something to produce.
_NOT_PRODUCED = frozenset(
    {"read", "reads", "reading", "from", "open", "opens", "load", "loads", "parse", "parses", "using", "existing"}
    | {"delete", "deletes", "remove", "removes", "rename", "renames"}
)
#: In a step, a file it imports or runs is one it uses, not the one it writes.
_USED = _NOT_PRODUCED | {"import", "imports", "importing", "run", "runs", "execute", "executes"}


class _Words:
    """The words of a text, read once, asked for by position: the two words before a file name, and whether a word
    of a set lies between two positions. Each file name of a long text asked again of the whole text before it was
    quadratic (a 12,000-character acceptance of file names took 12 s to read)."""

    def __init__(self, text: str, marked: frozenset[str] = frozenset()) -> None:
        self.text = text
        found = list(re.finditer(r"[A-Za-z]+", text))
        self.starts = [m.start() for m in found]
        self.ends = [m.end() for m in found]
        self.words = [m.group(0).lower() for m in found]
        self.marked = [0]  # how many of the first i words are in ``marked``
        for word in self.words:
            self.marked.append(self.marked[-1] + (word in marked))

    def before(self, at: int, n: int = 2) -> list[str]:
        """The ``n`` last words that end at or before ``at``."""
        i = bisect_right(self.ends, at)
        return self.words[max(0, i - n) : i]

    def any_marked(self, start: int, at: int) -> bool:
        """Whether a word of the marked set lies wholly between ``start`` and ``at``."""
        first, last = bisect_left(self.starts, start), bisect_right(self.ends, at)
        return last > first and self.marked[last] - self.marked[first] > 0


def file_mentions(text: str, *, used: bool = True) -> list[tuple[str, int]]:
    """Every mention of a file name in ``text``: (the name, where it starts), in order; without ``used``, only
    those not named as a file used (``reads data.txt``, ``imports util.py``: one of the two words before)."""
    text = text or ""
    found = [(m.group(1), m.start()) for m in _FILE.finditer(text)]
    if used:
        return found
    words = _Words(text)
    return [(n, at) for n, at in found if not any(w in _USED for w in words.before(at))]


#: Before a file's name, words that say the task reads it: "Read data.txt", "each line in data.txt".
_READ_ONLY = frozenset({"read", "reads", "reading", "from", "open", "opens", "load", "loads", "parse", "parses"}) | {
    "using",
    "uses",
    "in",
    "of",
    "existing",
}


#: Words that say a task changes a file: "Fix the bug in lib.py" names lib.py after "in", and is not a read.
_CHANGES = frozenset(
    {"fix", "fixes", "change", "changes", "update", "updates", "edit", "edits", "modify", "modifies", "correct"}
    | {"corrects", "add", "adds", "append", "appends", "replace", "replaces", "insert", "inserts", "set", "sets"}
    | {"remove", "removes", "delete", "deletes", "rename", "renames", "overwrite", "overwrites", "rewrite"}
)
#: Verbs that say a file is to be changed, not read: a file they govern is the task's to produce.
_FIXES = frozenset(
    {"fix", "fixes", "update", "updates", "change", "changes", "edit", "edits", "modify", "modifies", "correct"}
    | {"corrects"}
)
#: A word that points back at the file named before it ("add a line to it", "set its port").
_PRONOUN = re.compile(r"\b(?:it|its|them)\b", re.IGNORECASE)
#: Where the clause a file is named in begins: a sentence's end, a semicolon or colon, or "then".
_CLAUSE_START = re.compile(r"[.;:!?](?:\s|$)|,?\s+then\b", re.IGNORECASE)


def given_files(goal: str, root: Path | None) -> list[str]:
    """The files of the workspace a task only reads: each exists, and every mention of it in ``goal`` follows a word
    that reads it (``Read data.txt``, ``each line in data.txt``) among the two words before, in a clause that says
    no change ("Fix the bug in lib.py" changes lib.py). "lib.py has a bug: fix it", "Update data.txt" and "Read
    data.txt, then add a line to it" (a pronoun, before the next file name, in a clause that changes) are files to
    change, not given ones."""
    if root is None:
        return []
    goal = goal or ""
    mentions: dict[str, list[bool]] = {}
    words = _Words(goal, _CHANGES)
    starts = [c.end() for c in _CLAUSE_START.finditer(goal)]
    found = list(_FILE.finditer(goal))
    pronouns = [p.start() for p in _PRONOUN.finditer(goal)]
    for k, m in enumerate(found):
        at = m.start()
        clause = starts[i - 1] if (i := bisect_right(starts, at)) else 0
        read = any(w in _READ_ONLY for w in words.before(at)) and not words.any_marked(clause, at)
        if _changed_by_pronoun(found, k, pronouns, words, starts, _CHANGES):  # "Read data.txt, then add a line to it"
            read = False
        mentions.setdefault(m.group(1), []).append(read)
    return [name for name, reads in mentions.items() if all(reads) and (root / name).is_file()]


def changed_files(goal: str, root: Path | None) -> list[str]:
    """The files of the workspace a task says to fix or change, by a verb that means it ("fix", "update", "change",
    "edit", "modify", "correct"): in the clause before a mention ("Fix the bug in lib.py"), or just before a pronoun
    that points back at it ("lib.py has a bug: ... Fix it"). They are the task's to produce, as a new file is."""
    if root is None:
        return []
    goal = goal or ""
    words = _Words(goal, _FIXES)
    starts = [c.end() for c in _CLAUSE_START.finditer(goal)]
    found = list(_FILE.finditer(goal))
    pronouns = [p.start() for p in _PRONOUN.finditer(goal)]
    out: list[str] = []
    for k, m in enumerate(found):
        clause = starts[i - 1] if (i := bisect_right(starts, m.start())) else 0
        if words.any_marked(clause, m.start()) or _changed_by_pronoun(found, k, pronouns, words, starts, _FIXES):
            out.append(m.group(1))
    return [name for name in dict.fromkeys(out) if (root / name).is_file()]


def _changed_by_pronoun(
    found: list[re.Match[str]], k: int, pronouns: list[int], words: _Words, starts: list[int], verbs: frozenset[str]
) -> bool:
    """Whether a pronoun after file mention ``k`` of ``found``, before the next one, is the object of a change
    (`_changes_it`)."""
    after = found[k].end()
    until = found[k + 1].start() if k + 1 < len(found) else len(words.text)
    between = pronouns[bisect_left(pronouns, after) : bisect_left(pronouns, until)]
    return any(_changes_it(words, starts, after, it, verbs) for it in between)


def _changes_it(words: _Words, starts: list[int], after: int, it: int, verbs: frozenset[str]) -> bool:
    """Whether the pronoun at ``it`` is the object of a change: right after one of ``verbs`` ("update it", "set
    its port"), or "to it" in a clause (from ``after`` on) that has one ("add a line to it"). "add up the numbers in
    it" is not: the file stays one the task reads."""
    before = words.before(it, 1)
    if before and before[0] in verbs:
        return True
    since = starts[j - 1] if (j := bisect_right(starts, it)) else 0
    return before == ["to"] and words.any_marked(max(since, after), it)  # ``words`` marks ``verbs``


def deliverables(
    goal: str, root: Path | None = None, *, inputs: frozenset[str] = _NOT_PRODUCED, made: Collection[str] = ()
) -> list[str]:
    """The files a task asks to produce: those it names, less the ones named as inputs or to remove (``read
    data.txt``, ``delete old.py``: one of ``inputs`` among the two words before) and, when the workspace is known,
    the ones that exist in it already — unless the run made them (``made``: the paths it wrote; a repair is
    planned after some of its files exist)."""
    out: list[str] = []
    words = _Words(goal or "")
    for m in _FILE.finditer(goal or ""):
        if any(w in inputs for w in words.before(m.start())):
            continue
        name = m.group(1)
        if root is not None and (root / name).exists() and not any(p == name or p.endswith("/" + name) for p in made):
            continue
        out.append(name)
    return list(dict.fromkeys(out))


#: "Write app.py that prints the number of lines in data.txt": the file the step writes, then what it does.
_WRITES_ONE = re.compile(
    rf"\s*(?:write|create|make|add)\s+(?:a\s+|the\s+)?(?:new\s+)?(?:python\s+)?(?:file|script|module|program)?\s*"
    rf"`?(?P<f>{_FILE.pattern})`?\s+(?:that|which|to|with|so)\b",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=8192)
def produced_file(description: str, acceptance: str = "") -> str | None:
    """The one file a step produces, when its description names exactly one that is not an input (or, when the
    description names none, its acceptance does), or starts by writing one file and then says what it does
    ("Write app.py that prints the lines in data.txt"); None when that is not clear. Remembered (a pure
    function of its text): every executing step asks it of every done step (`done_files`)."""
    if (m := _WRITES_ONE.match(description or "")) is not None:
        return _placed(m.group("f"), acceptance)
    for text in (description, acceptance):
        named = deliverables(text, inputs=_USED)
        if named:
            return _placed(named[0], acceptance) if len(named) == 1 else None
    return None


def _placed(name: str, acceptance: str) -> str:
    """``name``, or the one path under a folder that the acceptance gives a bare file name: "Write empty
    __init__.py in util directory", accepted by "util/__init__.py exists", produces util/__init__.py, not a
    top-level __init__.py."""
    if "/" in name or "\\" in name:
        return name
    paths = {f for f in file_names(acceptance or "") if "/" in f and f.rsplit("/", 1)[1] == name}
    return paths.pop() if len(paths) == 1 else name


def done_files(plan: Plan, step: Step) -> frozenset[str]:
    """The files the plan's done steps (other than ``step``) produce (`produced_file`) that ``step`` does not: its
    own file, or, when it names no one file, every file it names to produce (`deliverables`). A write to one of
    them from ``step`` is refused where the step runs (`planmode.tools.loop.ToolGate`)."""
    own_one = produced_file(step.description, step.acceptance or "")
    own = {own_one} if own_one is not None else set(deliverables(step.description, inputs=_USED))
    done = set()
    for other in plan.steps:
        if other.id == step.id or other.status.value != "done":
            continue
        made = produced_file(other.description, other.acceptance or "")
        if made is not None:
            done.add(made)
    return frozenset(done - own)


#: A step that says its file is empty ("Write empty __init__.py", "util/__init__.py exists and is empty").
#: ("is not empty", "non-empty" say the opposite.)
_EMPTY_FILE = re.compile(r"(?<!not )(?<!non-)(?<!non )\bempty\b", re.IGNORECASE)
#: "empty" said of something else than a file: "standard input is empty", "an empty list", "the output is empty".
_EMPTY_OTHER = re.compile(
    r"\b(?:input|stdin|output|stdout|argv|arguments?|list|string|line|dict|result|answer)\s+(?:is|are|stays)\s+empty\b"
    r"|\bempty\s+(?:input|stdin|output|list|string|line|dict|result|answer|lines)\b",
    re.IGNORECASE,
)


def says_file_empty(text: str) -> bool:
    """Whether ``text`` says a file is empty: a clause (split at full stops, semicolons and lines) with "empty"
    in it that names a file and does not say it of something else ("standard input is empty", "an empty list"):
    "app.py reads data.txt; standard input is empty" does not say a file is empty, "Write an empty
    util/__init__.py" does."""
    for clause in re.split(r"\.\s|;|\n", text):
        if _EMPTY_FILE.search(clause) and not _EMPTY_OTHER.search(clause) and file_names(clause):
            return True
    return False
