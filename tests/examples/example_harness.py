"""Running an example's main() and reading what it printed."""

import re


def run(load_example, capsys, name, *args):
    """(exit code, stdout) of examples/<name>.py main(args); the output is echoed for -s runs."""
    code = load_example(name).main(list(args))
    text = capsys.readouterr().out
    print(text)
    return code, text


def host_lsb(text):
    """The largest .pte-vs-int8-PyTorch difference the example printed, in output LSBs."""
    m = re.search(r"vs quantized PyTorch: max (\d+) LSB", text)
    assert m, "no host-run comparison printed"
    return int(m.group(1))
