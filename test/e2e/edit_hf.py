#!/usr/bin/python3
"""Writes an edited copy of a Hugging Face model directory, as a careless
user (or a broken conversion script) would.

usage: edit_hf.py SRC DST EDIT...
EDIT: `config.KEY=JSON` sets a config.json field (`config.KEY=` removes it);
`transpose:NAME` stores tensor NAME with its two dimensions swapped (the
same bytes, as a transposed copy would have them); `nan:NAME` makes the
first element of tensor NAME a NaN (a run that diverged)."""
import json
import os
import shutil
import struct
import sys


def safetensors_files(directory):
    return [f for f in os.listdir(directory) if f.endswith(".safetensors")]


def edit_tensor(directory, name, change):
    """Rewrites the safetensors file holding tensor NAME: change(header,
    body) edits its header entry and data in place."""
    for file in safetensors_files(directory):
        path = os.path.join(directory, file)
        with open(path, "rb") as f:
            data = f.read()
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + length])
        if name not in header:
            continue
        body = bytearray(data[8 + length :])
        change(header, body)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + bytes(body))
        return
    sys.exit("no tensor " + name)


def transpose(header, body, name):
    header[name]["shape"] = header[name]["shape"][::-1]


def poison(header, body, name):
    """The data changes, so its checksum goes: the file reads as one written
    elsewhere (as poison_tensor.py does)."""
    header.get("__metadata__", {}).pop("checksum", None)
    at = header[name]["data_offsets"][0]
    nan = {"F32": struct.pack("<f", float("nan")), "BF16": b"\xc0\x7f"}[header[name]["dtype"]]
    body[at : at + len(nan)] = nan


src, dst = sys.argv[1:3]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
config_path = os.path.join(dst, "config.json")
for edit in sys.argv[3:]:
    if edit.startswith("config."):
        key, value = edit[len("config.") :].split("=", 1)
        config = json.load(open(config_path))
        if value:
            config[key] = json.loads(value)
        else:
            config.pop(key)
        json.dump(config, open(config_path, "w"))
    elif edit.startswith(("transpose:", "nan:")):
        kind, name = edit.split(":", 1)
        change = transpose if kind == "transpose" else poison
        edit_tensor(dst, name, lambda header, body: change(header, body, name))
    else:
        sys.exit("unknown edit " + edit)
