#!/usr/bin/env bash
# CI for every op under ops/: its generated files are current (opgen generate --check), it builds,
# and its tests pass. CI runs this; run it yourself before opening a pull request:
#
#   bash ci/run.sh                 check, build (CPU) and test every op
#   bash ci/run.sh --check-only    only the generate check (the pre-commit hook)
#
#   OPGEN_DEVICE=cpu|gpu|all       where the tests run (default cpu; gpu and all build CUDA too)
#   OPGEN="python -m opgen"        how to call opgen (default: opgen)
#
# The check accepts hand edits to generated files (`opgen generate` merges them into every later
# render) but fails when an op was not regenerated after its spec changed, or still holds merge
# conflicts. Drop --allow-edits below to forbid hand edits altogether.
set -uo pipefail
cd "$(dirname "$0")/.."

check_only=0
case "${1:-}" in
  "") ;;
  --check-only) check_only=1 ;;
  *) echo "usage: bash ci/run.sh [--check-only]" >&2; exit 2 ;;
esac
read -r -a opgen <<< "${OPGEN:-opgen}"
device="${OPGEN_DEVICE:-cpu}"
build_flags=()
[[ "$device" == cpu ]] && build_flags=(--cpu-only)

passed=()
failed=()
for op_dir in ops/*/; do
  op_dir="${op_dir%/}"
  name="$(basename "$op_dir")"
  spec="$op_dir/$name.yaml"
  if [[ ! -f "$spec" ]]; then
    echo "-- $op_dir: skipped (no $name.yaml)"
    continue
  fi
  echo "== $name"
  if "${opgen[@]}" generate --check --allow-edits "$spec" \
      && { (( check_only )) \
           || { "${opgen[@]}" build ${build_flags[@]+"${build_flags[@]}"} "$op_dir" \
                && "${opgen[@]}" test "$op_dir" --device "$device"; }; }; then
    passed+=("$name")
  else
    failed+=("$name")
    echo "== $name: FAILED"
  fi
done

if (( ${#passed[@]} + ${#failed[@]} == 0 )); then
  echo "ci: no ops under ops/ (add one: opgen new NAME --elementwise --dir ops)"
  exit 0
fi
echo "ci: ${#passed[@]} passed${passed[*]:+ (${passed[*]})}, ${#failed[@]} failed${failed[*]:+ (${failed[*]})}"
(( ${#failed[@]} == 0 ))
