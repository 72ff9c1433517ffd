#!/usr/bin/python3
"""Runs PyTorch's own launcher (torchrun or the legacy torch.distributed.launch) with one fix for Debian 12.

Debian's python3-torch 1.13 runs on Python 3.11, where iterating an IntFlag no longer yields its zero-valued
member (Python 3.11 "What's New", enum: "Changed Flag to ... not include aliases or zero-valued flags in
iteration"). torch/distributed/elastic/multiprocessing/api.py Std.from_str looks the value up with
`for s in Std: if s == v` and so maps "0" to None: torchrun's default `--redirects 0 --tee 0` then dies in
to_map() with "AttributeError: 'NoneType' object has no attribute 'get'" before any worker starts. This
wrapper replaces only Std.from_str with `Std(int(v))` and then runs the launcher module unchanged as
__main__, so everything it prints is torchrun's own output.

usage: launch.py run|launch LAUNCHER-ARGS...   (run = torchrun, launch = python3 -m torch.distributed.launch)
"""
import re
import runpy
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if re.match(api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = classmethod(_from_str)
module = {"run": "torch.distributed.run", "launch": "torch.distributed.launch"}[sys.argv[1]]
sys.argv = [{"run": "/usr/bin/torchrun", "launch": module.replace(".", "/") + ".py"}[sys.argv[1]]] + sys.argv[2:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
