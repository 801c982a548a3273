# apt_install.sh - sourced by the build scripts: apt_install WHO PACKAGE... installs Debian packages
# (with sudo when not root). Callers pass only the packages they found missing.
apt_install() {
  local who=$1
  shift
  [ $# -gt 0 ] || return 0
  echo "$who: installing Debian packages: $*"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
