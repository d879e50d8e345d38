"""Benchmark question files for `specviz bench`: Spec-Bench, MT-Bench, SPEED-Bench and the
shipped set (resources/prompts/bench.jsonl), one JSON object a line.

Each line has `turns` (a list of one or more user turns, each a non-empty string) and a
`category` (SPEED-Bench and MT-Bench may add `sub_category`); `question_id` is kept when
present (Spec-Bench: 1..480), else the line number. Other fields (`reference`, `source`,
`difficulty`, ...) are ignored. The whole file is read under a size limit and every turn
under its own, so a hostile file costs bounded memory and time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specviz.core.resources import resources_dir

MAX_FILE = 64 << 20  # Spec-Bench's question.jsonl is about 2 MB; SPEED-Bench's are larger
MAX_QUESTIONS = 20_000
MAX_TURN_CHARS = 200_000  # a turn longer than this is no chat question (1 MB: 10 rags)
MAX_TURNS = 8
MAX_LINE = MAX_TURNS * MAX_TURN_CHARS * 2  # bytes of one JSON line, escapes included


class QuestionFileError(ValueError):
    """A question file that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class Question:
    question_id: str  # as the file has it (Spec-Bench's are numbers), or the line number
    category: str
    turns: tuple[str, ...]  # user turns; turn 2 follows the model's own answer to turn 1
    sub_category: str | None = None


def shipped_questions() -> Path:
    return resources_dir() / "prompts" / "bench.jsonl"


def load_questions(path: str | Path | None = None, limit: int | None = None) -> list[Question]:
    """The questions of a JSONL file (the shipped set when path is None); at most `limit`
    (the first ones in file order). QuestionFileError for anything unusable."""
    path = Path(path) if path is not None else shipped_questions()
    questions: list[Question] = []
    for number, line in _lines(path):
        if not line.strip() or line.lstrip().startswith(b"#"):
            continue
        questions.append(_question(f"{path}: line {number}", line, number))
        if len(questions) > MAX_QUESTIONS:
            raise QuestionFileError(f"{path}: more than {MAX_QUESTIONS} questions")
        if limit is not None and len(questions) >= limit:
            break
    if not questions:
        raise QuestionFileError(f"{path}: holds no questions")
    return questions


def _lines(path: Path):
    """(line number, bytes) of a regular file, each line bounded; QuestionFileError."""
    import os
    import stat

    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise QuestionFileError(f"{path}: is a folder, not a question file")
        if not stat.S_ISREG(info.st_mode):
            raise QuestionFileError(f"{path}: not a regular file (a FIFO, a socket or a device)")
        if info.st_size > MAX_FILE:
            raise QuestionFileError(
                f"{path}: {info.st_size >> 20} MiB, larger than {MAX_FILE >> 20} MiB"
            )
        f = open(path, "rb")  # noqa: SIM115 - closed below, lines read lazily
    except FileNotFoundError:
        raise QuestionFileError(f"{path}: no such file") from None
    except OSError as e:
        raise QuestionFileError(f"{path}: cannot read it ({e.strerror or e})") from None
    with f:
        number, read = 0, 0
        while True:
            line = f.readline(MAX_LINE + 1)
            if not line:
                return
            number += 1
            read += len(line)
            if len(line) > MAX_LINE:
                raise QuestionFileError(f"{path}: line {number} is longer than {MAX_LINE} bytes")
            if read > MAX_FILE:  # the file grew while read
                raise QuestionFileError(f"{path}: larger than {MAX_FILE >> 20} MiB")
            yield number, line


def _question(where: str, line: bytes, number: int) -> Question:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise QuestionFileError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise QuestionFileError(f"{where}: not JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise QuestionFileError(f'{where}: expected an object {{"turns": [...], ...}}')
    turns = obj.get("turns")
    if turns is None:
        raise QuestionFileError(f"{where}: has no 'turns' (a list of the user's turns)")
    if isinstance(turns, str):
        turns = [turns]
    if not isinstance(turns, list) or not turns or len(turns) > MAX_TURNS:
        raise QuestionFileError(f"{where}: 'turns' must be a list of 1 to {MAX_TURNS} strings")
    for i, turn in enumerate(turns, 1):
        if not isinstance(turn, str) or not turn.strip():
            raise QuestionFileError(f"{where}: turn {i} must be a non-empty string")
        if len(turn) > MAX_TURN_CHARS:
            raise QuestionFileError(
                f"{where}: turn {i} is {len(turn)} characters, more than {MAX_TURN_CHARS}"
            )
    category = obj.get("category", "default")
    if not isinstance(category, str) or not category.strip():
        raise QuestionFileError(f"{where}: 'category' must be a non-empty string")
    sub = obj.get("sub_category")
    qid = obj.get("question_id", number)
    if isinstance(qid, bool) or not isinstance(qid, int | str):
        raise QuestionFileError(f"{where}: 'question_id' must be a number or a string")
    return Question(
        str(qid)[:80],
        category.strip()[:80],
        tuple(turns),
        sub.strip()[:80] if isinstance(sub, str) and sub.strip() else None,
    )


def categories(questions: list[Question]) -> list[str]:
    """Categories in order of first appearance."""
    return list(dict.fromkeys(q.category for q in questions))
