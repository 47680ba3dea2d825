import ArgumentParser
import Logging
import PostgresNIO

/// `--role`: act as the schema's owner (SET ROLE) when connected as another role, e.g. `postgres` over the Unix
/// socket: `migrate` changes the schema, `keys create|revoke` write keys the services' role may only read.
struct RoleOption: ParsableArguments {
    @Option(
        name: .long,
        help: "Act as this database role (SET ROLE), the schema's owner, when connected as another (e.g. postgres over the Unix socket)."
    )
    var role: String?

    func validate() throws {
        if let role, role.isEmpty || !role.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) || role.first!.isNumber {
            throw ValidationError("--role: expected a role name of letters, digits and _, got '\(role)'")
        }
    }

    /// Sets the role on `connection`, if one was given.
    func apply(to connection: PostgresConnection, logger: Logger) async throws {
        guard let role else { return }
        // A validated identifier (letters, digits, _), quoted.
        try await connection.query(PostgresQuery(unsafeSQL: "SET ROLE \"\(role.lowercased())\""), logger: logger)
    }
}
