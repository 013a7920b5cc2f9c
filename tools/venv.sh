#!/bin/sh
# The venv `make` runs everything in: made (or kept) with a Python >= 3.10, then ropepool installed into it.
#
#   sh tools/venv.sh VENV lab     the runtime (`make lab`): the op, the notebooks, the engine, mlx-lm
#   sh tools/venv.sh VENV test    the runtime plus the test extra (`make test`)
#   sh tools/venv.sh VENV docs    the runtime plus the docs extra (`make docs`, into a venv of its own)
#
# The interpreter: $PYTHON if set (refused, with one line saying why, when older than 3.10), else the first
# of python3, python3.13, python3.12, python3.11, python3.10 that is 3.10 or newer. VENV is made anew when it
# does not run (broken, or its Python was removed), is older than 3.10, has no pip (an interrupted set-up),
# or was made by another interpreter than the PYTHON asked for; a working VENV is kept otherwise. ropepool
# is (re)installed when the stamp of that set is missing or older than pyproject.toml, setup.py or
# ropepool-blas.pth.
# ROPEPOOL_VENV_DRY_RUN=1: say what would be done (one line) and do nothing (tests/test_setup.py).
# Only shell built-ins run before the venv is made, so that a PATH without any Python is handled too.
set -eu

venv=${1:?usage: sh tools/venv.sh VENV lab|test|docs}
set_=${2:-lab}
case "$0" in */*) cd "${0%/*}/.." ;; *) cd .. ;; esac  # the repository root, where make runs

HINT="install one (macOS on Apple Silicon: brew install python@3.12, or python.org's installer;"
HINT="$HINT Debian/Ubuntu: sudo apt install python3 python3-venv), then run make again,"
HINT="$HINT or name one: make lab PYTHON=/path/to/python3.12"

fail() { printf 'make: %s\n' "$*" >&2; exit 1; }

# "MAJOR.MINOR REALPATH" of interpreter $1, or nothing when it does not run.
probe() {
    "$1" -c 'import os, sys; print("%d.%d" % sys.version_info[:2], os.path.realpath(sys.executable))' 2>/dev/null \
        || true
}

new_enough() {  # $1: MAJOR.MINOR
    major=${1%%.*} minor=${1#*.}
    case "$major$minor" in *[!0-9]*|'') return 1 ;; esac
    [ "$major" -gt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -ge 10 ]; }
}

# 1. The interpreter.
why=""
if [ -n "${PYTHON:-}" ]; then
    info=$(probe "$PYTHON")
    [ -n "$info" ] || fail "PYTHON=$PYTHON does not run (not found, or not a Python): $HINT"
    new_enough "${info%% *}" || fail "PYTHON=$PYTHON is Python ${info%% *}; ropepool needs 3.10 or newer: $HINT"
    py=$PYTHON why="PYTHON=$PYTHON"
else
    py="" skipped=""
    for candidate in python3 python3.13 python3.12 python3.11 python3.10; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        info=$(probe "$candidate")
        [ -n "$info" ] || continue
        if new_enough "${info%% *}"; then
            py=$candidate
            break
        fi
        skipped="$skipped, $candidate is ${info%% *}"
    done
    [ -n "$py" ] || fail "no Python 3.10 or newer on PATH (tried python3, python3.13 ... python3.10${skipped}): $HINT"
    why="the first of python3, python3.13 ... python3.10 that is 3.10 or newer${skipped}"
fi
version=${info%% *} real=${info#* }

# 2. The venv: kept, or made anew (and why).
rebuild=""
if [ -e "$venv" ] || [ -L "$venv" ]; then
    [ -f "$venv/pyvenv.cfg" ] \
        || fail "$venv is not a venv (no pyvenv.cfg): move it away (or make clean), then make again"
    vinfo=$(probe "$venv/bin/python")
    if [ -z "$vinfo" ]; then
        rebuild="$venv does not run (broken, or the Python that made it is gone)"
    elif ! new_enough "${vinfo%% *}"; then
        rebuild="$venv is Python ${vinfo%% *}, older than 3.10"
    elif [ -n "${PYTHON:-}" ] && [ "${vinfo#* }" != "$real" ]; then
        rebuild="$venv was made by ${vinfo#* }, not by PYTHON=$PYTHON ($real)"
    elif ! "$venv/bin/python" -c 'import pip' >/dev/null 2>&1; then
        rebuild="$venv has no pip (an interrupted set-up)"
    fi
fi

if [ -e "$venv" ] && [ -z "$rebuild" ]; then
    plan="keep $venv (Python ${vinfo%% *}, ${vinfo#* })"
else
    # venv needs ensurepip to put pip in; Debian and Ubuntu ship both in a package of their own.
    if ! "$py" -c 'import ensurepip, venv; ensurepip.version()' >/dev/null 2>&1; then
        fail "$py (Python $version) lacks the venv/ensurepip modules: sudo apt install python$version-venv" \
             "(Debian/Ubuntu; or python3-venv), then make again"
    fi
    plan="make $venv with $py (Python $version, $real): ${rebuild:-$why}"
    [ -z "$rebuild" ] || plan="make $venv anew with $py (Python $version, $real): $rebuild"
fi

if [ "${ROPEPOOL_VENV_DRY_RUN:-}" = 1 ]; then
    printf 'make: would %s\n' "$plan"
    exit 0
fi

case "$plan" in
    keep*) ;;
    *)
        printf 'make: %s\n' "$plan"
        [ -z "$rebuild" ] || rm -rf "$venv"
        "$py" -m venv "$venv" || fail "$py -m venv $venv failed (above): remove $venv, then make again"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        ;;
esac

# 3. ropepool, with the set asked for.
case "$set_" in
    lab) spec="." stamp="$venv/.ropepool-installed" ;;
    test) spec=".[test]" stamp="$venv/.ropepool-test-installed" ;;
    docs) spec=".[docs]" stamp="$venv/.ropepool-docs-installed" ;;
    *) fail "tools/venv.sh: unknown set '$set_' (lab, test or docs)" ;;
esac
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
        || [ ropepool-blas.pth -nt "$stamp" ]; then
    # The lab set: --no-compile, as Python compiles a module when it is first imported; compiling every
    # module of every package at install time would add about 170 MB that a learner never runs.
    # The test set is compiled at install: pytest starts hundreds of processes (nbmake kernels, CLI runs),
    # and where PYTHONDONTWRITEBYTECODE is set (CI images often set it) none would ever find a .pyc.
    compile=--no-compile
    [ "$set_" = lab ] || compile=--compile
    "$venv/bin/python" -m pip install --quiet "$compile" -e "$spec"
    touch "$stamp"
    [ "$set_" = lab ] || touch "$venv/.ropepool-installed"  # the test and docs sets hold the runtime
fi
