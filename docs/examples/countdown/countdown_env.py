"""Countdown, a genenv environment: reach a target from given numbers with + - * /.

A task reads ``numbers: 3 5 8 | target: 64``; an answer is an arithmetic expression using each given number at
most once, such as ``(3 + 5) * 8``. Level k gives k + 1 numbers. The checker reads the answer with Python's
parser and walks the tree itself (numbers and + - * / only): it never runs it.
"""

from __future__ import annotations

import ast
import random
import re
from collections import Counter
from collections.abc import Callable
from fractions import Fraction

from genenv_engine.environments import CheckResult, LadderEnvironment, Task, Validation

PROMPT = re.compile(r"numbers: (\d{1,2}(?: \d{1,2}){1,4}) \| target: (\d{1,3})")
NUMBERS = range(1, 31)
OPS: dict[type, Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def value(node: ast.AST, used: list[int]) -> Fraction:
    """The value of a parsed expression of integers and + - * /, its numbers appended to ``used``; ValueError
    for anything else (a name, a call, a power), ZeroDivisionError for a division by zero."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return OPS[type(node.op)](value(node.left, used), value(node.right, used))
    raise ValueError("not_allowed")


def evaluate(text: str) -> tuple[Fraction, list[int]]:
    """The value of ``text`` and the numbers it uses; ValueError when it is not such an expression."""
    if len(text) > 80:
        raise ValueError("too_long")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError) as err:
        raise ValueError("unparsable") from err
    used: list[int] = []
    return value(tree.body, used), used


def solve(numbers: list[int], target: int) -> str | None:
    """An expression reaching ``target`` from ``numbers`` (each at most once, every step a whole number), or None.

    >>> solve([3, 5, 8], 64), solve([2, 2], 7)
    ('8 * (5 + 3)', None)
    """
    reach: dict[int, dict[int, str]] = {}  # a set of positions (a bitmask) -> value -> an expression
    for mask in range(1, 1 << len(numbers)):
        if mask & (mask - 1) == 0:
            n = numbers[mask.bit_length() - 1]
            reach[mask] = {n: str(n)}
            continue
        found: dict[int, str] = {}
        part = (mask - 1) & mask
        while part:
            for a, x in reach[part].items():
                for b, y in reach[mask ^ part].items():
                    found.setdefault(a + b, f"{x} + {y}")
                    found.setdefault(a * b, f"{wrap(x)} * {wrap(y)}")
                    if a > b:
                        found.setdefault(a - b, f"{x} - {wrap(y)}")
                    if a % b == 0:
                        found.setdefault(a // b, f"{wrap(x)} / {wrap(y)}")
            part = (part - 1) & mask
        reach[mask] = found
    for mask in sorted(reach, key=lambda m: bin(m).count("1")):  # the fewest numbers first
        if target in reach[mask]:
            return reach[mask][target]
    return None


def wrap(expression: str) -> str:
    return f"({expression})" if " " in expression else expression


class Countdown(LadderEnvironment):
    """Reach a target from 2-5 given numbers (level 1-4) with + - * /."""

    name = "countdown"
    api_version = 1
    data_version = 1
    source = "countdown example"

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        total = 0
        while not 0 < total < 1000:  # a chain of + - * over level + 1 numbers, its value the target
            numbers = [rng.choice(NUMBERS) for _ in range(level + 1)]
            total, answer = numbers[0], str(numbers[0])
            for n in numbers[1:]:
                op = rng.choice("+-*")
                total = {"+": total + n, "-": total - n, "*": total * n}[op]
                answer = f"{wrap(answer) if op == '*' else answer} {op} {n}"
        prompt = f"numbers: {' '.join(map(str, numbers))} | target: {total}"
        return prompt, lambda task_id, **fields: self.task(prompt, numbers, total, answer, task_id, **fields)

    def task(self, prompt: str, numbers: list[int], target: int, answer: str, task_id: str, **fields) -> Task:
        return Task(id=task_id, benchmark=self.name, prompt=prompt, answer=answer,
                    expected={"numbers": numbers, "target": target},
                    difficulty={"level": len(numbers) - 1, "features": {}}, checker="countdown", **fields)

    def check(self, task: Task, response: str) -> CheckResult:
        try:
            total, used = evaluate(response)
        except ValueError as err:
            return CheckResult(False, 0.0, error_type=str(err))
        except ZeroDivisionError:
            return CheckResult(False, 0.0, error_type="division_by_zero")
        if Counter(used) - Counter(task.expected["numbers"]):
            return CheckResult(False, 0.0, error_type="number_not_given")
        if total != task.expected["target"]:
            return CheckResult(False, 0.0, error_type="wrong_value")
        return CheckResult(True, 1.0)

    def validate(self, prompt: str, answer: str, *, task_id: str, parent: Task | None = None,
                 epoch: int = 0, generator: str | None = None) -> Validation:
        rejected = self._guard(prompt, answer, parent, max_prompt=60, max_answer=80)
        if rejected:
            return rejected
        match = PROMPT.fullmatch(prompt)
        if match is None:
            return Validation(False, "bad_prompt")
        numbers, target = [int(n) for n in match[1].split()], int(match[2])
        gold = solve(numbers, target)  # the gold recomputed from the prompt alone
        if gold is None:
            return Validation(False, "unreachable")
        return self._accept(self.task(prompt, numbers, target, gold, task_id,
                                      **self._generated(parent, epoch, generator)), answer)

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        while True:
            prompt, build = self.draft(self._sibling_level(source, rng), rng)
            task = self._as_sibling(source, prompt, build(task_id).answer, task_id)
            if task is not None:
                return task

    def template_key(self, prompt: str) -> str:
        """Two tasks are one template only when they give the same numbers, in any order, and the same target
        (the default masks every number, which would cap all tasks of a level together)."""
        match = PROMPT.fullmatch(prompt)
        return f"{sorted(int(n) for n in match[1].split())} -> {match[2]}" if match else prompt
