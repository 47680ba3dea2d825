#!/usr/bin/env python3
"""Runs a systemd unit's ExecStart the way systemd would, on a machine without systemd (the deployment test).

    unit.py [--map FROM=TO]... [--dropin FILE]... UNIT_FILE

Reads from the unit file, not from a copy of its settings: User=, Group=, WorkingDirectory=, Environment=,
EnvironmentFile= (systemd's syntax; its keys override Environment=), ExecStart=, UMask=, LimitNOFILE=,
ReadWritePaths=, ProtectSystem=strict, ProtectHome=, PrivateTmp=, NoNewPrivileges= and CapabilityBoundingSet=.
Every path is passed through the --map replacements first (the test installs under a scratch prefix). A --dropin
file is read after the unit, as systemd reads UNIT.d/*.conf (`systemctl edit`): list settings (Environment=,
EnvironmentFile=, ReadWritePaths=) add to the unit's, others replace them.

Then replaces itself with the command: in a private mount namespace where / is read-only but for ReadWritePaths=,
/tmp and /var/tmp are empty and private and /home and /root are empty (ProtectSystem=strict, PrivateTmp=yes,
ProtectHome=yes), as the unit's user with no capabilities and no new privileges (setpriv), with the unit's umask
and file limit. The process id stays the same, so a caller can signal it.

Before that it checks what would stop systemd or the service: a missing user, working directory, executable or
ReadWritePaths= folder; an option naming a file outside every writable path; an environment file that systemd
and sh read differently (a trailing comment, quotes, spaces).
"""
import os
import pwd
import grp
import resource
import shlex
import subprocess
import sys


def fail(message):
    print(f"unit.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_unit(path, mapping, settings=None):
    settings = {} if settings is None else settings
    section = None
    with open(path) as file:
        for raw in file:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            if "=" not in line:
                fail(f"{path}: cannot read line: {line}")
            key, value = line.split("=", 1)
            for source, target in mapping:
                value = value.replace(source, target)
            settings.setdefault((section, key.strip()), []).append(value.strip())
    return settings


def systemd_environment_file(path):
    """KEY=VALUE lines as systemd reads them: # and ; comment lines, values stripped and unquoted."""
    values = {}
    with open(path) as file:
        for number, raw in enumerate(file, 1):
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if "=" not in line:
                fail(f"{path}:{number}: not KEY=VALUE: {line}")
            key, value = line.split("=", 1)
            key, value = key.strip(), value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[key] = value
    return values


def sh_environment_file(path):
    """The same file as `set -a; . FILE` in sh reads it (the guide's migrate line and the crontab)."""
    output = subprocess.run(
        ["sh", "-c", 'set -a; . "$0"; env -0', path], env={"PATH": "/usr/bin:/bin"}, capture_output=True, check=True
    ).stdout
    values = {}
    for entry in output.split(b"\0"):
        if b"=" in entry:
            key, value = entry.split(b"=", 1)
            values[key.decode()] = value.decode()
    return values


def main(arguments):
    mapping = []
    dropins = []
    while arguments and arguments[0] in ("--map", "--dropin") and len(arguments) > 1:
        if arguments[0] == "--map":
            source, _, target = arguments[1].partition("=")
            mapping.append((source, target))
        else:
            dropins.append(arguments[1])
        arguments = arguments[2:]
    if len(arguments) != 1:
        fail("usage: unit.py [--map FROM=TO]... [--dropin FILE]... UNIT_FILE")
    unit = arguments[0]
    settings = parse_unit(unit, mapping)
    for dropin in dropins:
        parse_unit(dropin, mapping, settings)

    def values(key):
        return settings.get(("Service", key), [])

    def value(key, default=None):
        found = values(key)
        return found[-1] if found else default

    user = value("User") or fail(f"{unit}: no User= (the services must not run as root)")
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        fail(f"{unit}: User={user} does not exist")
    group = value("Group", grp.getgrgid(account.pw_gid).gr_name)

    environment = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": account.pw_dir,
        "USER": user,
        "LOGNAME": user,
        "SHELL": account.pw_shell,
    }
    for line in values("Environment"):
        for assignment in shlex.split(line):
            key, _, val = assignment.partition("=")
            environment[key] = val
    for path in values("EnvironmentFile"):
        optional = path.startswith("-")
        path = path.lstrip("-")
        if not os.path.exists(path):
            if optional:
                continue
            fail(f"{unit}: EnvironmentFile={path} does not exist")
        by_systemd = systemd_environment_file(path)
        by_sh = sh_environment_file(path)
        for key, val in by_systemd.items():
            if by_sh.get(key) != val:
                fail(f"{path}: systemd reads {key} as {val!r} but sh as {by_sh.get(key)!r}: write KEY=VALUE only")
        environment.update(by_systemd)

    command = shlex.split(value("ExecStart") or fail(f"{unit}: no ExecStart="))
    command[0] = command[0].lstrip("-@+!:")
    if not os.access(command[0], os.X_OK):
        fail(f"{unit}: ExecStart={command[0]} is not executable")
    directory = value("WorkingDirectory", account.pw_dir).lstrip("-")
    if not os.path.isdir(directory):
        fail(f"{unit}: WorkingDirectory={directory} does not exist")

    writable = []
    for line in values("ReadWritePaths"):
        for path in line.split():
            optional = path.startswith("-")
            path = path.lstrip("-")
            if not os.path.isdir(path):
                if optional:
                    continue
                fail(f"{unit}: ReadWritePaths={path} does not exist (systemd would refuse to start the unit)")
            writable.append(path)
    strict = value("ProtectSystem") == "strict"
    if strict:
        for option, path in zip(command, command[1:]):
            if option.endswith("-file") and path.startswith("/"):
                if not any(os.path.dirname(path) == w or os.path.dirname(path).startswith(w + "/") for w in writable):
                    fail(f"{unit}: {option} {path} is outside every ReadWritePaths= (ProtectSystem=strict)")

    if value("UMask"):
        os.umask(int(value("UMask"), 8))
    if value("LimitNOFILE"):
        limit = int(value("LimitNOFILE"))
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
        except (ValueError, OSError):
            # A container may hold the hard limit below it (systemd as PID 1 can raise it): use what is allowed.
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            print(f"unit.py: LimitNOFILE={limit} is above this machine's hard limit {hard}; using {hard}", file=sys.stderr)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    drop = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={grp.getgrnam(group).gr_gid}", "--init-groups"]
    if value("CapabilityBoundingSet") == "":
        drop += ["--inh-caps=-all", "--bounding-set=-all"]
    if value("NoNewPrivileges") in ("yes", "true", "1"):
        drop += ["--no-new-privs"]
    drop += ["--"] + command

    mounts = ["mount --make-rprivate /"]
    if strict:
        mounts += [f"mount --bind {shlex.quote(w)} {shlex.quote(w)}" for w in writable]
        mounts += ["mount -o remount,bind,ro /"]
    if value("PrivateTmp") in ("yes", "true"):
        mounts += ["mount -t tmpfs -o mode=1777 tmpfs /tmp", "mount -t tmpfs -o mode=1777 tmpfs /var/tmp"]
    if value("ProtectHome") in ("yes", "true"):
        mounts += [f"mount -t tmpfs -o mode=0755 tmpfs {home}" for home in ("/home", "/root") if os.path.isdir(home)]
    script = " && ".join(mounts + [f"cd {shlex.quote(directory)}", "exec " + shlex.join(drop)])
    os.execvpe("unshare", ["unshare", "--mount", "--", "sh", "-c", script], environment)


if __name__ == "__main__":
    main(sys.argv[1:])
