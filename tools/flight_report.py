#!/usr/bin/env python3
"""tools/flight_report.py: what every rank of a communicator was doing when it broke.

Reads the flight records that ranks write when their communicator breaks
(TESSERA_FLIGHT_RECORDER_DIR: tessera-flight-<comm id>-rank<r>.json, comm/flight_recorder.h)
and prints, per communicator:
  - each rank's last completed operation and the one it failed or was in;
  - the ranks that wrote no record (they did not fail: stalled, killed, or still running)
    and the ranks behind the others (an older last completed operation);
  - a verdict naming the suspects.

  python3 tools/flight_report.py DIR [--comm ID]
Exit status 0 when records were found, 1 when none were.
"""
import argparse
import glob
import json
import os
import sys


def load(directory):
    """comm id -> {rank: record} for every readable file in `directory`."""
    comms = {}
    for path in sorted(glob.glob(os.path.join(directory, "tessera-flight-*-rank*.json"))):
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError) as e:
            print(f"skipped {path}: {e}", file=sys.stderr)
            continue
        comms.setdefault(record["comm_id"], {})[record["rank"]] = record
    return comms


def describe(entry, now_us):
    """'#73 allreduce 67108864 B (ring), failed after 5001 ms'"""
    end = entry["end_us"] or now_us
    algorithm = f" ({entry['algorithm']})" if entry["algorithm"] else ""
    return (f"#{entry['seq']} {entry['op']} {entry['bytes']} B{algorithm}, {entry['state']} after "
            f"{(end - entry['start_us']) / 1000:.0f} ms")


def last_done(record):
    """The last completed collective's sequence number (sends/receives have seq 0)."""
    done = [e["seq"] for e in record["entries"] if e["state"] == "done" and e["seq"] > 0]
    return max(done) if done else 0


def open_seq(record):
    """The collective this rank was in (running or failed), or 0."""
    open_entries = [e["seq"] for e in record["entries"] if e["state"] != "done" and e["seq"] > 0]
    return max(open_entries) if open_entries else 0


def culprit_tags(records):
    """The diagnosis' '[culprit: ...]' tags found in the ranks' reasons."""
    tags = set()
    for r in records.values():
        start = r["reason"].find("[culprit: ")
        if start >= 0:
            tags.add(r["reason"][start:r["reason"].find("]", start) + 1])
    return sorted(tags)


def hostname(identity):
    """A host identity's hostname ("vm/net:4026531833/boot:b381e8b9" -> "vm"), as
    tessera's messages name hosts (topology/host_identity.h: HostnameOf)."""
    for part in ("/net:", "/boot:"):
        if part in identity:
            return identity[:identity.index(part)]
    return identity


def report(comm_id, records):
    nranks = next(iter(records.values()))["nranks"]
    lines = [f"communicator {comm_id}: records from {len(records)} of {nranks} ranks"]
    for rank in sorted(records):
        r = records[rank]
        open_entries = [e for e in r["entries"] if e["state"] != "done"]
        where = describe(open_entries[-1], r["dumped_us"]) if open_entries else "no operation open"
        lines.append(f"  rank {rank} (pid {r['pid']} on {hostname(r['host'])}): last completed #{last_done(r)}; {where}")
        lines.append(f"    reason: {r['reason']}")
    missing = [rank for rank in range(nranks) if rank not in records]
    failing = max(open_seq(r) for r in records.values())
    newest = max(last_done(r) for r in records.values())
    idle = sorted(rank for rank, r in records.items() if open_seq(r) == 0 and last_done(r) < failing)
    behind = sorted(rank for rank, r in records.items() if last_done(r) < newest and rank not in idle)
    if missing:
        lines.append(f"  no record from rank(s) {', '.join(map(str, missing))}: they did not fail here "
                     "(stalled, killed, or never reached the failing call)")
    if idle:
        lines.append(f"  outside tessera: rank(s) {', '.join(map(str, idle))} (never called #{failing})")
    if behind:
        lines.append(f"  behind: rank(s) {', '.join(map(str, behind))} (last completed older than #{newest})")
    suspects = missing + idle + behind
    waiting_in = failing or newest + 1
    if suspects:
        lines.append(f"verdict: suspect rank(s) {', '.join(map(str, sorted(suspects)))}; "
                     f"the others were waiting in #{waiting_in}")
    else:
        lines.append(f"verdict: every rank failed in #{waiting_in}; see the reasons above")
    tags = culprit_tags(records)
    if tags:
        lines.append(f"diagnosis agreed by the ranks: {' / '.join(tags)}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory")
    parser.add_argument("--comm", help="only this communicator id")
    args = parser.parse_args()
    comms = load(args.directory)
    if args.comm:
        comms = {k: v for k, v in comms.items() if k == args.comm}
    if not comms:
        print(f"no flight records in {args.directory}")
        return 1
    print("\n\n".join(report(comm_id, records) for comm_id, records in sorted(comms.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
