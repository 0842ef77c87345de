# Sourced by the A/B drivers (demo_ab.sh, kernel_ab.sh): builds a baseline revision beside
# the current tree, in a detached git worktree of its own.
#
#   build_baseline TOOL REPO REV WORK BUILD_TYPE TARGET...
# Sets SHA (the full commit), TREE (the worktree) and BASE_BUILD (its build directory).
build_baseline() {
  local tool=$1 repo=$2 rev=$3 work=$4 build_type=$5
  shift 5
  SHA=$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}") ||
    { echo "$tool: $rev is not a commit of $repo" >&2; exit 2; }
  TREE="$work/src-${SHA:0:12}"
  BASE_BUILD="$work/build-${SHA:0:12}"
  mkdir -p "$work"
  if [ ! -d "$TREE" ]; then
    echo "# baseline worktree $TREE ($SHA)"
    git -C "$repo" worktree add --detach "$TREE" "$SHA" >/dev/null
  fi
  echo "# building the baseline's $* in $BASE_BUILD"
  cmake -S "$TREE" -B "$BASE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
    -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" >/dev/null
  cmake --build "$BASE_BUILD" --target "$@" -- -j2 >/dev/null
}
