"""Memory of an XTS3 graph: the arena rule the parser enforces
(``arena_rule``), the planner that places tensors by it (``arena_plan``),
the op order that lowers the planned arena (``op_order``) and the choice
between layer-by-layer and fused band-by-band execution
(``schedule_search``). The serializer (serialization.xts3_serializer) only
writes the offsets it is given."""

from .arena_plan import ArenaPlan, plan_arena
from .arena_rule import ArenaGraph, Liveness, OpIO, liveness
from .fused_regions import (BandGraph, FusedRegion, RegionLayout, RegionRefused, fusable_chains, fuse, is_fusable,
                            region_layout)
from .op_order import memory_order
from .schedule_search import SCHEDULE_MODES, Schedule, ScheduleError, choose_schedule

__all__ = ["SCHEDULE_MODES", "ArenaGraph", "ArenaPlan", "BandGraph", "FusedRegion", "Liveness", "OpIO",
           "RegionLayout", "RegionRefused", "Schedule", "ScheduleError", "choose_schedule", "fusable_chains", "fuse",
           "is_fusable", "liveness", "memory_order", "plan_arena", "region_layout"]
