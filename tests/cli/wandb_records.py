"""Read an offline W&B run (``offline-run-*/run-<id>.wandb``) back as its protobuf records.

The file is wandb's transaction log: a 7-byte header (``:W&B``, magic 0xBEE1, version) and then
LevelDB-log blocks of 32 KiB, each record framed as checksum (4 bytes), length (2), type (1:
full, 2: first, 3: middle, 4: last). wandb >= 0.2x reads it in its Go core only, so the tests
parse the framing here (checksums not verified) and decode each payload as ``wandb.proto``'s Record.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = struct.Struct("<4sHB")
RECORD = struct.Struct("<IHB")


def payloads(path: Path) -> list[bytes]:
    data = Path(path).read_bytes()
    ident, magic, _ = HEADER.unpack_from(data, 0)
    assert ident == b":W&B" and magic == 0xBEE1, f"{path} is not a W&B transaction log"
    out: list[bytes] = []
    pos, parts = HEADER.size, b""
    while pos + RECORD.size <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < RECORD.size:  # block trailer padding
            pos += left_in_block
            continue
        _, length, kind = RECORD.unpack_from(data, pos)
        pos += RECORD.size
        if pos + length > len(data):  # the writer is still appending this record
            break
        if kind == 0 and length == 0:
            pos += left_in_block - RECORD.size
            continue
        chunk, pos = data[pos:pos + length], pos + length
        if kind == 1:
            out.append(chunk)
        elif kind == 2:
            parts = chunk
        elif kind == 3:
            parts += chunk
        elif kind == 4:
            out.append(parts + chunk)
            parts = b""
    return out


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    out = []
    for payload in payloads(path):
        rec = pb.Record()
        rec.ParseFromString(payload)
        out.append(rec)
    return out


def complete_records(path: Path, timeout_s: float = 60.0) -> list[Any]:
    """The records of a finished run; wandb's core process may still be flushing the file when
    ``wandb.finish()`` returns, so wait (bounded) for its exit record. A read that catches a record
    half-written (its payload does not parse yet) is retried until the deadline."""
    import time

    from google.protobuf.message import DecodeError

    deadline = time.time() + timeout_s
    while True:
        try:
            found = records(path)
        except DecodeError:
            if time.time() > deadline:
                raise
            found = []
        if any(r.WhichOneof("record_type") == "exit" for r in found) or time.time() > deadline:
            return found
        time.sleep(0.5)


def offline_run(run_dir: Path) -> dict[str, Any]:
    """The W&B run written under ``run_dir/wandb/``: run record fields, config keys, history and summary keys."""
    files = sorted(Path(run_dir).glob("wandb/offline-run-*/run-*.wandb"))
    assert files, f"no offline W&B run under {run_dir}/wandb"
    info: dict[str, Any] = {"files": files, "config": {}, "history": set(), "summary": set(), "runs": []}
    for path in files:
        for rec in complete_records(path):
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                r = rec.run
                info["runs"].append({"id": r.run_id, "group": r.run_group, "job_type": r.job_type, "tags": list(r.tags),
                                     "name": r.display_name, "project": r.project, "sweep_id": r.sweep_id})
                info["config"].update({u.key: u.value_json for u in r.config.update})
            elif kind == "config":
                info["config"].update({u.key: u.value_json for u in rec.config.update})
            elif kind == "history":
                info["history"].update(i.key or "/".join(i.nested_key) for i in rec.history.item)
            elif kind == "summary":
                info["summary"].update(u.key or "/".join(u.nested_key) for u in rec.summary.update)
    return info


def offline_runs(run_dir: Path) -> list[dict[str, Any]]:
    """Each offline W&B run folder under ``run_dir/wandb/`` on its own, oldest first: its folder, the
    run record's fields (``id``, ``group``, ``job_type``, ``name``, ``tags``, ``project``, ``resume``,
    ``start_time`` in microseconds: what ``wandb sync`` orders one run's folders by), ``config`` and ``summary``
    as key -> decoded JSON value (the last update of each key), and ``history`` as the logged rows."""
    import json

    out = []
    for path in sorted(Path(run_dir).glob("wandb/offline-run-*/run-*.wandb")):
        info: dict[str, Any] = {"folder": path.parent, "config": {}, "summary": {}, "history": []}
        for rec in complete_records(path):
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                r = rec.run
                info.update(id=r.run_id, group=r.run_group, job_type=r.job_type, name=r.display_name,
                            tags=list(r.tags), project=r.project, resume=r.resume,
                            start_time=r.start_time.ToMicroseconds())
                info["config"].update({u.key: json.loads(u.value_json) for u in r.config.update})
            elif kind == "config":
                info["config"].update({u.key: json.loads(u.value_json) for u in rec.config.update})
            elif kind == "history":
                info["history"].append({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                        for i in rec.history.item})
            elif kind == "summary":
                info["summary"].update({u.key or "/".join(u.nested_key): json.loads(u.value_json)
                                        for u in rec.summary.update})
        out.append(info)
    return out
