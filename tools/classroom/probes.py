"""Probes the grader runs in a student's kernel: did a cell change how later cells run, or the setup's objects?"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field

MARK = "GRADER-PROBE"
# Modules whose public functions a hidden test relies on (torch.equal, math.isclose, builtins' abs and all).
WATCHED = ("builtins", "torch", "torch.testing", "torch.nn.functional", "math", "numpy", "helpers")

_PROBE = r'''
def __grader_probe(mode, nonce, watched):
    import copy, hashlib, json, sys
    import torch
    ip = get_ipython()
    ns = ip.user_ns

    def fingerprint(obj):
        digest = hashlib.blake2b(digest_size=16)
        tensors = obj.state_dict().values() if isinstance(obj, torch.nn.Module) else [obj]
        for tensor in tensors:
            digest.update(tensor.detach().float().contiguous().numpy().tobytes())
        return digest.hexdigest()

    shared = lambda name, value: not name.startswith("_") and isinstance(value, (torch.Tensor, torch.nn.Module))
    restored = []
    if mode == "alive":
        return print("%s", json.dumps({"proof": hashlib.sha256(nonce.encode()).hexdigest()}))
    if mode == "baseline":
        ip._grader_snapshot = {name: (id(value), copy.deepcopy(value)) for name, value in ns.items()
                               if shared(name, value)}
    else:  # put back, in place where possible, what a student's cell changed: modules first (views follow them)
        for name, (ident, saved) in sorted(ip._grader_snapshot.items(),
                                           key=lambda item: not isinstance(item[1][1], torch.nn.Module)):
            value = ns.get(name)
            if value is not None and id(value) == ident and fingerprint(value) == fingerprint(saved):
                continue
            restored.append(name)
            with torch.no_grad():
                if id(value) == ident and isinstance(value, torch.nn.Module):
                    value.load_state_dict(saved.state_dict())
                elif id(value) == ident and value.shape == saved.shape:
                    value.copy_(saved)
                else:
                    ns[name] = copy.deepcopy(saved)
    hooks = lambda obj: sorted(k for k, v in vars(obj).items() if callable(v) and not k.startswith("__"))
    state = {
        "proof": hashlib.sha256(nonce.encode()).hexdigest(),
        "transformers": [repr(f) for f in [*ip.input_transformers_cleanup, *ip.input_transformers_post,
                                           *ip.ast_transformers]],
        "hooks": hooks(ip) + hooks(ip.kernel),
        "modules": {name: id(module) for name, module in list(sys.modules.items())},
        "functions": {m: {k: id(v) for k, v in vars(sys.modules[m]).items()
                          if callable(v) and not k.startswith("_") and k not in ("input", "raw_input")}
                      for m in watched if m in sys.modules},  # ipykernel swaps input() at every request
        "restored": restored,
        "peak_mb": __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss // 1024,
        "fingerprints": {name: fingerprint(ns[name]) for name in ip._grader_snapshot},
    }
    print("%s", json.dumps(state))


__grader_probe(%r, %r, %r)
del __grader_probe
'''


def probe_source(mode: str) -> tuple[str, str]:
    """(code, nonce) of one probe: 'baseline' (after setup), 'check' (restores and reports), 'alive' (answers)."""
    nonce = secrets.token_hex(16)
    return _PROBE % (MARK, MARK, mode, nonce, WATCHED), nonce


def read_probe(outputs: list, nonce: str) -> dict | None:
    """The state a probe printed, or None if it did not run as written (its proof is missing or wrong)."""
    text = "".join(out.get("text", "") for out in outputs if out.get("output_type") == "stream")
    for line in text.splitlines():
        if line.startswith(MARK + " "):
            try:
                state = json.loads(line[len(MARK) + 1:])
            except json.JSONDecodeError:
                return None
            return state if state.get("proof") == hashlib.sha256(nonce.encode()).hexdigest() else None
    return None


@dataclass
class Integrity:
    """The baseline taken after the setup cell, and what the later probes found against it."""

    baseline: dict
    tampering: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    peak_mb: int | None = None

    def check(self, state: dict | None, where: str) -> None:
        """Compare one probe's state with the baseline; record tampering and what was restored."""
        if state is None:
            self.tampering.append(f"{where}: the grader's check did not run as written (a cell changed how later "
                                  "cells run)")
            return
        base = self.baseline
        self.peak_mb = state.get("peak_mb")
        if state["transformers"] != base["transformers"]:
            added = [t for t in state["transformers"] if t not in base["transformers"]]
            self.tampering.append(f"{where}: input transformers were registered ({', '.join(added)[:200]}); they "
                                  "rewrite every later cell, the checks included")
        if state["hooks"] != base["hooks"]:
            self.tampering.append(f"{where}: the kernel's own methods were replaced "
                                  f"({sorted(set(state['hooks']) ^ set(base['hooks']))})")
        swapped = sorted(name for name, ident in base["modules"].items() if state["modules"].get(name) != ident)
        if swapped:
            self.tampering.append(f"{where}: sys.modules was changed ({', '.join(swapped[:5])})")
        patched = sorted(f"{module}.{name}" for module, functions in base["functions"].items()
                         for name, ident in functions.items()
                         if state["functions"].get(module, {}).get(name) != ident)
        if patched:
            self.tampering.append(f"{where}: library functions the checks use were replaced ({', '.join(patched[:5])})")
        if state["restored"]:
            self.restored.append(f"{where}: the setup's {', '.join(state['restored'])} had been changed by an "
                                 "answer; restored before the checks ran")
        if state["fingerprints"] != base["fingerprints"]:
            self.tampering.append(f"{where}: the setup's objects could not be restored")
