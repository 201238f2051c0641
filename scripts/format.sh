#!/usr/bin/env bash
# Checks that every C, header and CUDA file of the tree is formatted as
# .clang-format says; --fix formats them in place.  The tree is formatted
# with clang-format 14 (Debian 12's, which CI installs); another version
# formats some constructs differently, so there a difference is reported
# but does not fail, unless IPCPIPE_FORMAT_STRICT=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
want=14
if ! command -v clang-format >/dev/null 2>&1; then
    echo "format.sh: clang-format is not installed (Debian: clang-format)" >&2
    exit 2
fi
major=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu')
if [ "${1:-}" = --fix ]; then
    clang-format --style=file -i "${files[@]}"
    exit 0
fi
bad=()
for f in "${files[@]}"; do
    clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
done
if [ ${#bad[@]} -eq 0 ]; then
    echo "format.sh: ${#files[@]} files formatted as .clang-format says"
    exit 0
fi
echo "format.sh: ${#bad[@]} of ${#files[@]} files differ from .clang-format" \
    "(clang-format $major; scripts/format.sh --fix formats them):" >&2
printf '  %s\n' "${bad[@]}" >&2
if [ "$major" != "$want" ] && [ "${IPCPIPE_FORMAT_STRICT:-0}" != 1 ]; then
    echo "format.sh: the tree is formatted with clang-format $want;" \
        "not failing on version $major" >&2
    exit 0
fi
exit 1
