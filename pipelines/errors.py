"""Errors a data steward can act on: each names the file, the column, the problem and the fix."""
from __future__ import annotations


class InputError(Exception):
    """Bad input (file, schema, table, configuration). Nothing has been written when it is raised."""

    def __init__(self, problem: str, *, file: str | None = None, column: str | None = None,
                 fix: str | None = None) -> None:
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


class BudgetExceededError(Exception):
    """A stage's planned privacy spend would push the data set past its lifetime budget."""

    def __init__(self, dataset: str, spent: float, planned: float, after: float, budget: float,
                 fix: str | None = None) -> None:
        self.dataset, self.spent, self.planned, self.after, self.budget = dataset, spent, planned, after, budget
        remaining = max(budget - spent, 0.0)
        fix = fix or ("lower the stage's epsilon, or raise the data set's lifetime budget only if your privacy "
                      "officer approves")
        super().__init__(
            f"privacy budget refused for data set '{dataset}': spent ε={spent:.4g}, this stage plans "
            f"ε={planned:.4g} (alone), total after it would be ε={after:.4g} > lifetime budget "
            f"ε={budget:.4g}; remaining ε={remaining:.4g}. No data was read. Fix: {fix}.")


class LedgerIntegrityError(Exception):
    """The ledger's hash chain does not verify (a row was edited, deleted or inserted)."""
