# `k3host plan --ranks N` on the demo geometry: every rank's range, its own overrides, the
# experts and the bytes it sends as the wire format gives them, and exit 3 naming a rank that
# does not fit (tests/support/plan_ranks_test.py). Needs no MPI: it only plans.
add_test(NAME "cli-plan-ranks: plan --ranks covers every layer once, applies a rank's own keys, sends what the wire format gives, names a rank that does not fit"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/support/plan_ranks_test.py $<TARGET_FILE:k3host>
                 ${PROJECT_SOURCE_DIR})
