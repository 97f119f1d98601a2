#!/usr/bin/env python3
"""Applies group-ban rules offline to the verdicts a swarm run logged.

tests/adversarial/README.md ("False bans with no attacker"): for each run
directory of tools/experiments/poison_swarm.sh (one with logs/NAME.err), the
offences (a part pulled in or left out as not finite, Note [Group bans]) per
(shard owner, stage, sender), never the owner's own, and the bans that
  old: 3 offences within the last 10 rounds (the rule before Note [Offences
       in a row]) and
  new: 3 offences in consecutive rounds, or a decayed count (each offence 1,
       x0.92 a round) reaching 3.5 (Note [Offences in a row]; iterations
       stand for rounds: these runs average every iteration)
would give, with the longest run of consecutive offences and the highest
decayed count of any (owner, stage, sender). A ban changes the
verdicts after it (the banned sender's parts are left out, not judged), so
the rule the binary did not run is exact only up to its first ban.

  tools/experiments/ban_rules.py /tmp/poison/none /tmp/poison/signflip_8
"""
import collections
import glob
import os
import re
import sys

VERDICT = re.compile(r"iteration (\d+) stage (\d+): the gradient part of ([0-9a-f]{8}) was "
                     r"(pulled in|left out: not finite)")


def main(dirs):
    for d in dirs:
        names = {}  # short id -> node name, from each log's first "id XXXXXXXX"
        logs = glob.glob(os.path.join(d, "logs", "*.err"))
        for f in logs:
            with open(f, errors="ignore") as fh:
                m = re.search(r"id ([0-9a-f]{8})", fh.read(20000))
            if m:
                names[m.group(1)] = os.path.basename(f)[:-4]
        offences = collections.defaultdict(set)
        for f in logs:
            owner = os.path.basename(f)[:-4]
            with open(f, errors="ignore") as fh:
                for line in fh:
                    m = VERDICT.search(line)
                    if not m:
                        continue
                    sender = names.get(m.group(3), m.group(3))
                    if sender != owner:
                        offences[(owner, int(m.group(2)), sender)].add(int(m.group(1)))
        old, new, longest, top = [], [], 0, 0.0
        for key, its in sorted(offences.items()):
            its = sorted(its)
            for i, it in enumerate(its):
                if sum(1 for x in its[:i + 1] if x + 10 > it) >= 3:
                    old.append((key, it))
                    break
            run = best = 1
            for a, b in zip(its, its[1:]):
                run = run + 1 if b == a + 1 else 1
                best = max(best, run)
            longest = max(longest, best)
            score, last, peak = 0.0, None, 0.0
            for it in its:
                score = (score * 0.92 ** (it - last) if last is not None else 0.0) + 1
                last = it
                peak = max(peak, score)
            top = max(top, peak)
            if best >= 3 or peak >= 3.5:
                new.append(key)
        total = sum(len(v) for v in offences.values())
        print(f"{d}: offences {total}; old rule bans {len(old)} "
              f"{[f'{o} bans {s} at stage {st}, iteration {it}' for (o, st, s), it in old]}; "
              f"new rule bans {len(new)} {new}; longest run {longest}; "
              f"highest decayed count {top:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
