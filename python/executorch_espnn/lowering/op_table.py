"""What a lowering module says about itself in docs/lowering.md's table
"Where each op family lives". The rows are declared next to the code they
describe (`OP_TABLE_ROWS` in the module of lowering/ops/ the row names
first), and scripts/gen_lowering_table.py writes the table from them, so a
new op family is documented by its own module and the page cannot drift
from it (tests/test_op_tables.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpTableRow:
    """One row of the table.

    position: where the row stands in the table (rows are sorted by it;
        numbered in tens so a new row fits between two);
    pytorch: the PyTorch ops the module takes, with their limits;
    xts3: the XTS3 op(s) they become (every opcode a lowering writes must be
        named in some row's `xts3`);
    also_in: other lowering modules that share the row (their stems), named
        after the declaring module in the table's module column.
    """

    position: int
    pytorch: str
    xts3: str
    also_in: tuple[str, ...] = ()
