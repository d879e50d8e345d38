#!/usr/bin/env bash
# Checks (and, as root with apt-get, installs) the Debian packages specviz needs.
#   gui:  Qt's xcb platform libraries, for a real window
#   test: the corpus packages that the tiny pair's training script reads (its smoke test)
set -u
what=${1:-gui}
gui_pkgs=(libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0
  libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0 libegl1 libgl1
  libfontconfig1 libdbus-1-3)
test_pkgs=(bible-kjv bible-kjv-text fortunes fortunes-min)
case "$what" in
  gui) pkgs=("${gui_pkgs[@]}") ;;
  test) pkgs=("${test_pkgs[@]}") ;;
  *) echo "usage: $0 gui|test" >&2; exit 2 ;;
esac
command -v dpkg-query >/dev/null || exit 0  # not Debian: nothing to check
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "[specviz] installing Debian packages: ${missing[*]}" >&2
  if { apt-get install -y -q --no-install-recommends "${missing[@]}" ||
       { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; }; } \
       >/tmp/specviz-apt.log 2>&1; then
    exit 0
  fi
  echo "[specviz] apt-get failed (log: /tmp/specviz-apt.log)" >&2
fi
echo "[specviz] missing Debian packages: ${missing[*]}" >&2
echo "[specviz] install them with: sudo apt-get install ${missing[*]}" >&2
if [ "$what" = gui ]; then
  echo "[specviz] without them Qt cannot open a window (QT_QPA_PLATFORM=offscreen still works)" >&2
  exit 1
fi
exit 0  # tests that need the corpus skip with a reason
