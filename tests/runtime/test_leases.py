"""bench/runtime/leases.py: the heartbeat that renews leases while their work runs."""

from __future__ import annotations

import threading
from pathlib import Path

from biobench.runtime import leases
from biobench.runtime.leases import FolderLeases, Heartbeat, Holder


class RemovedDuringRenewal(FolderLeases):
    """Lease files whose first look at the generations during a renewal lets another thread release the lease
    (heartbeat.remove, then the folder deleted, as RunClaims.release does for a finished run) before the renewal
    writes. `released` is set once that thread is through."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.armed = False
        self.heartbeat: Heartbeat | None = None
        self.lease: leases.Lease | None = None
        self.released = threading.Event()
        self.renewal_saw_release = False

    def list(self, prefix: str) -> list[str]:
        found = super().list(prefix)
        if self.armed:
            self.armed = False
            threading.Thread(target=self._release, daemon=True).start()
            # the renewal goes on at once when remove() is through, or after a second when remove() waits for it
            self.renewal_saw_release = self.released.wait(1.0)
        return found

    def _release(self) -> None:
        assert self.heartbeat is not None and self.lease is not None
        self.heartbeat.remove(self.lease)
        self.remove(self.lease.folder)
        self.released.set()


def test_a_lease_removed_while_it_is_renewed_is_not_written_back(tmp_path):
    """A renewal that had checked its lease before the lease was removed and released wrote the lease file
    again: a finished run's claim folder came back (tests/eval/test_claims.py saw it under load), and the next
    process waited a claim period for nothing. remove() now waits for the renewal in flight."""
    files = RemovedDuringRenewal(tmp_path)
    lease = leases.acquire(files, "run.claim", Holder.here(), 60.0)
    assert lease is not None and (tmp_path / "run.claim").is_dir()
    heartbeat = Heartbeat(lambda _: files, lease_s=60.0, every_s=0.05)
    files.heartbeat, files.lease = heartbeat, lease
    files.armed = True
    heartbeat.add(lease)
    assert files.released.wait(30)
    heartbeat.stop()
    assert not files.renewal_saw_release  # the release waited for the renewal in flight
    assert not (tmp_path / "run.claim").exists()
    assert heartbeat.lost == [] and heartbeat.leases == []
