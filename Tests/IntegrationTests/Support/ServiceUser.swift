import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The unprivileged account the executables run as when the tests run as root, as systemd runs them in
/// production (`User=pushchat`, no capabilities). A privilege the code needs by accident (a socket option at the
/// wrong level needed CAP_NET_ADMIN once) then fails the tests instead of production.
///
/// `scripts/test.sh` creates the account and names it in `PUSHCHAT_TEST_SERVICE_USER`.
enum ServiceUser {
    static let variable = "PUSHCHAT_TEST_SERVICE_USER"

    struct Account {
        let name: String
        let uid: uid_t
        let gid: gid_t
    }

    /// The account executables drop to, or nil when the tests do not run as root (nothing to drop).
    static let account: Account? = {
        guard geteuid() == 0 else { return nil }
        guard let name = ProcessInfo.processInfo.environment[variable], !name.isEmpty else {
            // `swift test` alone (the unit tests' command): executables run as root; scripts/test.sh always sets it.
            FileHandle.standardError.write(
                Data("\(variable) is not set: executables run as root here (scripts/test.sh runs them as the service user)\n".utf8)
            )
            return nil
        }
        guard let entry = getpwnam(name) else {
            Issue.record("\(variable)=\(name): no such user")
            return nil
        }
        return Account(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
    }()

    /// The command line that runs `executable` as the service user without capabilities (or as is, when not root).
    static func command(_ executable: URL, _ arguments: [String]) -> (URL, [String]) {
        guard let account else { return (executable, arguments) }
        let drop = [
            "--reuid=\(account.uid)", "--regid=\(account.gid)", "--init-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
        ]
        return (URL(fileURLWithPath: "/usr/bin/setpriv"), drop + [executable.path] + arguments)
    }

    /// Hands a folder the tests made to the service user, so the executables can write there (logs, records,
    /// metrics files), as `LogsDirectory=`/`ReadWritePaths=` do for the units.
    static func own(_ path: String) {
        guard let account else { return }
        if chown(path, account.uid, account.gid) != 0 {
            Issue.record("chown \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Makes a file readable by the service user's group only (keys and certificates: 0640 root:pushchat, as the
    /// deployment guide installs them).
    static func shareWithGroup(_ path: String, mode: mode_t = 0o640) {
        guard let account else { return }
        if chown(path, 0, account.gid) != 0 || chmod(path, mode) != 0 {
            Issue.record("sharing \(path) with the service user: \(String(cString: strerror(errno)))")
        }
    }
}
