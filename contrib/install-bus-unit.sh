#!/usr/bin/env bash
# install-bus-unit.sh installs the mosaic bus as a systemd user unit:
# renders units/mosaic-bus.service.in with the mosaic binary's absolute path
# into ~/.config/systemd/user/mosaic-bus.service, reloads the user manager
# and enables and starts it. Running it again changes nothing.
#
#   contrib/install-bus-unit.sh [--mosaic PATH]   install (PATH: default `command -v mosaic`)
#   contrib/install-bus-unit.sh --print [--mosaic PATH]   render to stdout only
#   contrib/install-bus-unit.sh --uninstall       stop, disable and remove it
#
# It never creates or reads ~/.config/mosaic/secrets/session.env: write that
# file yourself (mode 0600) with the credentials launched sessions get.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
template=$here/units/mosaic-bus.service.in
unit_dir=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user
unit=$unit_dir/mosaic-bus.service

die() { echo "install-bus-unit: $*" >&2; exit 1; }

mode=install mosaic=""
while [ $# -gt 0 ]; do
	case $1 in
		--mosaic) [ $# -ge 2 ] || die "--mosaic needs a PATH"; mosaic=$2; shift 2 ;;
		--mosaic=*) mosaic=${1#--mosaic=}; shift ;;
		--print) mode=print; shift ;;
		--uninstall) mode=uninstall; shift ;;
		-h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) die "unknown option $1 (use --mosaic PATH, --print or --uninstall)" ;;
	esac
done

if [ "$mode" = uninstall ]; then
	if [ -e "$unit" ]; then
		systemctl --user disable --now mosaic-bus.service >/dev/null 2>&1 || true
		rm -f "$unit"
		systemctl --user daemon-reload
		echo "removed $unit"
	else
		echo "mosaic-bus.service is not installed ($unit does not exist)"
	fi
	exit 0
fi

if [ -z "$mosaic" ]; then
	mosaic=$(command -v mosaic || true)
	[ -n "$mosaic" ] || die "mosaic is not on your PATH: give its path with --mosaic PATH"
fi
# systemd expands % and splits on spaces in ExecStart=: only plain paths.
case $mosaic in
	/*) ;;
	*) die "--mosaic $mosaic is not an absolute path" ;;
esac
if ! [[ $mosaic =~ ^[A-Za-z0-9/._+-]+$ ]]; then
	die "--mosaic $mosaic has characters systemd would rewrite (only A-Z a-z 0-9 / . _ + - are allowed): install mosaic at a plain path"
fi
[ -f "$mosaic" ] && [ -x "$mosaic" ] || die "--mosaic $mosaic is not an executable file"
# The unit's PrivateTmp= gives the bus /tmp and /var/tmp of its own: a
# binary there is not what it would run.
case $(readlink -f "$mosaic") in
	/tmp/*|/var/tmp/*) die "--mosaic $mosaic is under /tmp or /var/tmp, which the bus's unit hides from it (PrivateTmp=yes): install mosaic elsewhere, e.g. ~/.local/bin" ;;
esac
# The sessions the bus launches run their sandbox's stages from mosaic-stage
# beside the binary (its real path, as mosaic finds it).
stage=$(dirname "$(readlink -f "$mosaic")")/mosaic-stage
[ -f "$stage" ] && [ -x "$stage" ] || die "$stage is missing: mosaic runs its sessions' stages from it; install both (make install)"
[ -r "$template" ] || die "cannot read $template"
# The bus may write only its state directory, which the unit names: the one
# mosaic uses in this shell ($XDG_STATE_HOME, else ~/.local/state), written
# into the unit with the variable itself, so that a different XDG_STATE_HOME
# in the user manager's environment (environment.d, set-environment) cannot
# send the bus elsewhere: mosaic in this shell would not see what it records
# (the sessions it launched, their ends), and outside the home the bus could
# not even write (ProtectSystem=strict leaves the home and /run/user).
state=${XDG_STATE_HOME:-}
case $state in
	/*) ;;
	*) state=$HOME/.local/state ;; # as mosaic: a relative XDG_STATE_HOME is ignored
esac
if ! [[ $state =~ ^[A-Za-z0-9/._+-]+$ ]]; then
	die "the state directory $state has characters systemd would rewrite (only A-Z a-z 0-9 / . _ + - are allowed): set XDG_STATE_HOME to a plain path"
fi

rendered=$(sed -e "s|@MOSAIC@|$mosaic|g" -e "s|@STATE@|$state|g" "$template")
if [ "$mode" = print ]; then
	printf '%s\n' "$rendered"
	exit 0
fi

mkdir -p "$unit_dir"
changed=no
if [ -f "$unit" ] && [ "$(cat "$unit")" = "$rendered" ]; then
	echo "$unit is up to date"
else
	tmp=$(mktemp "$unit_dir/.mosaic-bus.service.XXXXXX")
	printf '%s\n' "$rendered" >"$tmp"
	chmod 0644 "$tmp"
	mv -f "$tmp" "$unit"
	echo "wrote $unit"
	changed=yes
	systemctl --user daemon-reload
fi
started=yes
if [ "$changed" = yes ]; then
	systemctl --user enable mosaic-bus.service >/dev/null 2>&1 && systemctl --user restart mosaic-bus.service || started=no
else
	systemctl --user enable --now mosaic-bus.service >/dev/null 2>&1 || started=no
fi
if [ "$started" = no ]; then
	systemctl --user status --no-pager mosaic-bus.service >&2 || true
	die "mosaic-bus.service did not start: see the lines above and journalctl --user -u mosaic-bus"
fi
echo "mosaic-bus.service is enabled and $(systemctl --user is-active mosaic-bus.service)"
