/// The one shape of PushChat's errors: a struct with a `code` (what went wrong, from a small set of static values,
/// as postgres-nio's `PSQLError.Code`), a `reason` in words, and a one-line `description` that says what it is about
/// and never holds a secret or a whole device token.
package protocol PushChatError: Error, CustomStringConvertible, Sendable {
    associatedtype Code: Hashable & Sendable & CustomStringConvertible
    var code: Code { get }
    var reason: String { get }
    /// The status a process exits with when it stops on this error: 78 (EX_CONFIG) for a setting or a file it
    /// cannot use (restarting cannot help: systemd's `RestartPreventExitStatus=78`), 1 otherwise.
    var exitStatus: Int32 { get }
}

extension PushChatError {
    package var exitStatus: Int32 { 1 }
}

/// A code for the errors of type `Domain`: `ErrorCode<GatewayError>.connectionFailed` is declared in an extension
/// `where Domain == GatewayError`, so each error type has its own set without writing a `Code` type of its own.
package struct ErrorCode<Domain>: Hashable, Sendable, CustomStringConvertible {
    package let name: String
    package init(_ name: String) { self.name = name }
    package var description: String { name }
}
