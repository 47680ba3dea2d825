import Foundation
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// Database TLS with libpq's meaning, against the test cluster, which runs like a stock Debian server: `ssl = on`
/// with a self-signed certificate (`scripts/test.sh`; `PUSHCHAT_TEST_DATABASE_CA` names that certificate).
@Suite struct DatabaseTLSTests {
    static func caFile() throws -> String {
        guard let file = ProcessInfo.processInfo.environment["PUSHCHAT_TEST_DATABASE_CA"], !file.isEmpty else {
            try Test.cancel("needs the test cluster's certificate (PUSHCHAT_TEST_DATABASE_CA, set by scripts/test.sh)")
        }
        return file
    }

    /// The server URL with `query` in place of its parameters.
    static func url(_ query: String) throws -> DatabaseURL {
        let server = try TestDatabase.serverURL()
        return try DatabaseURL(parsing: "postgres://\(server.username)@\(server.host):\(server.port)/\(server.database)?\(query)")
    }

    /// Whether this session is encrypted, as the server sees it.
    static func encrypted(_ url: DatabaseURL) async throws -> Bool {
        try await TestDatabase.scalar(url, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
    }

    @Test func theGuidesURLWithoutSslmodeEncryptsWithoutVerifyingTheSelfSignedCertificate() async throws {
        _ = try Self.caFile()
        let server = try TestDatabase.serverURL()
        let guideForm = try DatabaseURL(parsing: "postgres://\(server.username)@\(server.host):\(server.port)/\(server.database)")
        #expect(guideForm.tlsMode == .prefer)
        #expect(try await Self.encrypted(guideForm))
        #expect(try await Self.encrypted(try Self.url("sslmode=require")))
        #expect(try await Self.encrypted(try Self.url("sslmode=allow")))
        #expect(try await Self.encrypted(try Self.url("sslmode=disable")) == false)
    }

    @Test func verifyFullAcceptsTheServerAgainstItsOwnCertificate() async throws {
        let ca = try Self.caFile()
        #expect(try await Self.encrypted(try Self.url("sslmode=verify-full&sslrootcert=\(ca)")))
        #expect(try await Self.encrypted(try Self.url("sslmode=verify-ca&sslrootcert=\(ca)")))
    }

    @Test func verifyingAgainstOtherRootsRefusesTheConnection() async throws {
        _ = try Self.caFile()
        let otherCA = TestCertificates.path("ca.pem")
        // require with a root file verifies the chain, as libpq does.
        for query in [
            "sslmode=verify-full&sslrootcert=\(otherCA)", "sslmode=verify-ca&sslrootcert=\(otherCA)", "sslmode=verify-full",
            "sslmode=require&sslrootcert=\(otherCA)",
        ] {
            let error = await #expect(throws: DatabaseError.self, "\(query)") { try await Self.encrypted(try Self.url(query)) }
            #expect(error?.description.contains("CERTIFICATE_VERIFY_FAILED") == true, "\(query): \(String(describing: error))")
        }
    }

    @Test func theAPIExecutableMigratesOverTLSAsTheServiceUser() async throws {
        _ = try Self.caFile()
        try await TestDatabase.withFreshDatabase { url in
            let result = try Executable(name: "pushchat-api").run(
                ["migrate", "--status", "production"],
                environment: [
                    "PUSHCHAT_DATABASE_URL": url.connectionString.replacingOccurrences(of: "sslmode=prefer", with: "sslmode=require"),
                    "PUSHCHAT_MIGRATIONS_DIR": TestDatabase.migrationsDirectory, "PUSHCHAT_LOG_FILE": "-",
                ]
            )
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.contains("001"), "\(result.standardOutput)")
        }
    }
}
