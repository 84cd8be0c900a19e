"""Planning: what a run may do before it reads anything. The plan of the next window from the positions
and the last stable offsets, the positions read back from the outputs' lineage, the preflight checks
(topics, ACLs, features, writable outputs) and the recovery that takes over the transactional ids.
Stands on the shared modules and on :mod:`..publishing` (the recovery's producers)."""
