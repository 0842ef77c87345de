#!/bin/bash
# Formats the project's own C++ files with clang-format 14 and the repository's .clang-format,
# or checks that they are formatted. Its own files are the *.cpp, *.hpp and *.h under core/,
# sdk/, plugins/, tests/ and tools/ that git tracks (every such file under those folders
# when there is no git): nothing a build writes, nothing npm installs. Pinned to clang-format
# 14 because other versions format the same style differently.
#
#   tools/format.sh [--check] [--clang-format EXE] [FILE...]
#     (no option)          rewrite every file that is not formatted
#     --check              change nothing; list each file that is not formatted with the
#                          number of its lines formatting would change, then the totals;
#                          exit 1 if any, 0 if none
#     --clang-format EXE   the clang-format to run (default clang-format-14, else
#                          clang-format if it is version 14)
#     FILE...              only these files (default: all of the project's own)
#
# After formatting sdk/k3/*.hpp, run tools/sdk-abi-lock.sh: the lock hashes their bytes
# (formatting changes no layout, so K3_PLUGIN_ABI stays). Exit codes: 0 formatted (or, with
# --check, nothing to change), 1 files to change (--check), 2 usage or no clang-format 14.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
check=0
exe=""
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1; shift ;;
    --clang-format) [ $# -ge 2 ] || { echo "format.sh: --clang-format needs an executable" >&2; exit 2; }
                    exe=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "format.sh: unknown option '$1' (usage: tools/format.sh [--check] [--clang-format EXE] [FILE...])" >&2
        exit 2 ;;
    *) files+=("$1"); shift ;;
  esac
done

if [ -z "$exe" ]; then
  for candidate in clang-format-14 clang-format; do
    if command -v "$candidate" >/dev/null && "$candidate" --version | grep -q 'version 14\.'; then
      exe=$candidate
      break
    fi
  done
fi
if [ -z "$exe" ] || ! command -v "$exe" >/dev/null; then
  echo "format.sh: no clang-format 14 (Debian: apt-get install clang-format-14; or --clang-format EXE)" >&2
  exit 2
fi
"$exe" --version | grep -q 'version 14\.' ||
  { echo "format.sh: $exe is not clang-format 14: $("$exe" --version | head -1)" >&2; exit 2; }
[ -f "$root/.clang-format" ] || { echo "format.sh: no .clang-format in $root" >&2; exit 2; }

cd "$root"
if [ ${#files[@]} -eq 0 ]; then
  # git's list only when this folder is the top of its own work tree (a scratch copy inside
  # another repository's tree lists its files itself).
  if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$root" ]; then
    mapfile -t files < <(git ls-files -- 'core/*.cpp' 'core/*.hpp' 'core/*.h' 'sdk/*.cpp' 'sdk/*.hpp' 'sdk/*.h' \
                           'plugins/*.cpp' 'plugins/*.hpp' 'plugins/*.h' 'tests/*.cpp' 'tests/*.hpp' 'tests/*.h' \
                           'tools/*.cpp' 'tools/*.hpp' 'tools/*.h' | grep -v '/node_modules/')
  else
    mapfile -t files < <(find core sdk plugins tests tools -name node_modules -prune -o \
                           -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) -print | LC_ALL=C sort)
  fi
fi
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "format.sh: no file '$f'" >&2; exit 2; }
done

if [ "$check" = 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 32 -P "$(nproc)" "$exe" -i --style=file
  echo "format.sh: formatted ${#files[@]} files with $exe"
  exit 0
fi

changed_files=0
changed_lines=0
for f in "${files[@]}"; do
  # Lines of the file that formatting would replace or remove.
  n=$("$exe" --style=file --assume-filename="$f" < "$f" | diff "$f" - | grep -c '^<' || true)
  if [ "$n" -gt 0 ]; then
    echo "$f: $n lines"
    changed_files=$((changed_files + 1))
    changed_lines=$((changed_lines + n))
  fi
done
echo "format.sh: $changed_files of ${#files[@]} files not formatted, $changed_lines lines would change"
[ "$changed_files" -eq 0 ]
