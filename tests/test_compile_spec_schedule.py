"""Compile options of the schedule: parse_size (the CLI's --arena-budget and
EspNNCompileSpecBuilder.set_arena_budget), the "schedule" and
"arena_budget" compile specs and their round trip."""

import pytest

from executorch_espnn.compile_spec import CompileOptions, parse_size


@pytest.mark.parametrize("text, expected", [
    ("320K", 320 * 1024), ("320k", 327_680), ("320KB", 327_680), ("320KiB", 327_680), ("1.5M", 1_572_864),
    ("2M", 2 * 1024 * 1024), ("16000", 16_000), ("16000B", 16_000), (" 9600 ", 9_600), (9600, 9_600),
    ("0.5K", 512),
])
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text, message", [
    ("abc", "not a size"), ("320G", "not a size"), ("-5", "not a size"), ("", "not a size"),
    ("0", "more than 0"), (0, "more than 0"), ("1.3", "whole number"), ("0.1K", "whole number"),
    ("4096M", "32-bit"), (True, "not a size"),
])
def test_bad_sizes_say_what_is_read(text, message):
    with pytest.raises(ValueError, match=message):
        parse_size(text)


class Spec:  # what ExecuTorch hands preprocess: .key, .value (bytes)
    def __init__(self, key, value):
        self.key, self.value = key, value


def test_options_default_to_auto_without_budget():
    o = CompileOptions.from_specs([])
    assert (o.schedule, o.arena_budget) == ("auto", None)


def test_options_read_schedule_and_budget():
    o = CompileOptions.from_specs([Spec("schedule", b"layer"), Spec("arena_budget", b"327680")])
    assert (o.schedule, o.arena_budget) == ("layer", 327_680)


@pytest.mark.parametrize("specs, message", [
    ([Spec("schedule", b"fastest")], "schedule='fastest'"),
    ([Spec("arena_budget", b"320K")], "decimal number of bytes"),
    ([Spec("arena_budget", b"0")], "more than 0"),
    ([Spec("schedule", b"auto"), Spec("schedule", b"layer")], "given twice"),
])
def test_options_refuse_bad_specs(specs, message):
    with pytest.raises(ValueError, match=message):
        CompileOptions.from_specs(specs)


def test_builder_round_trip():
    pytest.importorskip("executorch")
    from executorch_espnn import EspNNCompileSpecBuilder

    specs = EspNNCompileSpecBuilder().set_target("esp32").set_schedule("fused").set_arena_budget("1.5M").build()
    o = CompileOptions.from_specs(specs)
    assert (o.target, o.schedule, o.arena_budget) == ("esp32", "fused", 1_572_864)
    assert [s.key for s in EspNNCompileSpecBuilder().build()] == ["target"]  # defaults add nothing
    with pytest.raises(ValueError, match="schedule 'x'"):
        EspNNCompileSpecBuilder().set_schedule("x")
    with pytest.raises(ValueError, match="not a size"):
        EspNNCompileSpecBuilder().set_arena_budget("lots")
