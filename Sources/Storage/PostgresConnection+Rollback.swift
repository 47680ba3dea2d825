import Logging
import PostgresNIO
import Support

extension PostgresConnection {
    /// Ends a failed transaction so the connection can be used again, never waiting long: a connection the server
    /// closed (terminated backend, restart) is left alone — a query sent on it as it closes is never answered (a
    /// test that killed the backend mid-transaction hung here) — and a ROLLBACK unanswered after 5 s closes it.
    func rollBack(logger: Logger) async {
        guard !isClosed else { return }
        do {
            try await withDeadline(.seconds(5)) { [self] in _ = try await self.query("ROLLBACK", logger: logger) }
        } catch {
            try? await close()
        }
    }
}
