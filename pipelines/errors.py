"""Errors a data steward can act on: each names the file, the column, the problem and the fix."""

from __future__ import annotations


class InputError(Exception):
    """Bad input (file, schema, table, configuration). Nothing has been written when it is raised."""

    def __init__(
        self, problem: str, *, file: str | None = None, column: str | None = None, fix: str | None = None
    ) -> None:
        self.file, self.column, self.problem, self.fix = file, column, problem, fix
        parts = []
        if file:
            parts.append(f"file {file}")
        if column:
            parts.append(f"column '{column}'")
        where = (", ".join(parts) + ": ") if parts else ""
        super().__init__(where + problem + (f" Fix: {fix}" if fix else ""))


class SchemaError(InputError):
    """The public schema itself is malformed."""


class ParamError(ValueError):
    """A generator parameter outside its range, raised by the generator module's `check_params` (a ValueError,
    as a generator built directly always raised); `key` is its params.yaml key path, e.g. 'pearl.frequencies',
    which pipelines/config.py names in its InputError, with `fix` where the check knows it (a range's)."""

    def __init__(self, key: str, problem: str, fix: str | None = None) -> None:
        self.key, self.problem, self.fix = key, problem, fix
        super().__init__(f"{key} {problem}")


class BudgetExceededError(Exception):
    """A stage's planned privacy spend would push the data set past its lifetime budget."""

    def __init__(
        self, dataset: str, spent: float, planned: float, after: float, budget: float, fix: str | None = None
    ) -> None:
        self.dataset, self.spent, self.planned, self.after, self.budget = dataset, spent, planned, after, budget
        remaining = max(budget - spent, 0.0)
        fix = fix or (
            "lower the stage's epsilon, or raise the data set's lifetime budget only if your privacy officer approves"
        )
        super().__init__(
            f"privacy budget refused for data set '{dataset}': spent ε={spent:.4g}, this stage plans "
            f"ε={planned:.4g} (alone), total after it would be ε={after:.4g} > lifetime budget "
            f"ε={budget:.4g}; remaining ε={remaining:.4g}. No data was read. Fix: {fix}."
        )


class BudgetOverspentError(BudgetExceededError):
    """A stage's *actual* events pushed the data set past its lifetime budget. Unlike its parent,
    raised after the fact: the data was read, so the actual events are already in the ledger."""

    def __init__(
        self,
        dataset: str,
        reservation_seq: int,
        stage: str,
        spent: float,
        planned: float,
        actual: float,
        after: float,
        budget: float,
        row_ids: list[int],
    ) -> None:
        Exception.__init__(
            self,
            f"privacy budget exceeded for data set '{dataset}' by the actual events of {stage} "
            f"(reservation {reservation_seq}): spent ε={spent:.4g} by every other reservation, this stage planned "
            f"ε={planned:.4g} but spent ε={actual:.4g} (alone); the data set's total is now ε={after:.4g} > "
            f"lifetime budget ε={budget:.4g}; remaining ε=0. The actual events are recorded (ledger rows "
            f"{', '.join(map(str, row_ids))}): the data was read. Fix: the stage spent more than it planned, a bug "
            "in its privacy plan; do not release its output, and report it to your privacy officer.",
        )
        self.dataset, self.spent, self.planned, self.after, self.budget = dataset, spent, planned, after, budget
        self.actual, self.reservation_seq, self.row_ids = actual, reservation_seq, list(row_ids)


class LedgerIntegrityError(Exception):
    """The ledger's hash chain does not verify (a row was edited, deleted or inserted)."""
