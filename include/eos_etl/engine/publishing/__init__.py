"""Publishing: one writer slot's slices of a window, exactly once. The typed producer, the transaction loop
(the state machine each transactional id follows), the checkpoint that owns a partition's positions and
their commit, and a fenced attempt stepping aside. Stands on the engine's shared modules only."""
