import Foundation
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// The executables as an operator runs them.
@Suite struct CommandLineTests {
    let api = Executable(name: "pushchat-api")

    @Test func aMissingSettingStopsWithOneLineNamingTheKey() throws {
        let result = try api.run(["development"], environment: ["PUSHCHAT_LOG_FILE": "-"])
        #expect(result.status == 78)
        let lines = result.standardError.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.contains("PUSHCHAT_DATABASE_URL") == true)
    }

    @Test func aMalformedSettingStopsWithOneLineNamingTheKey() throws {
        let result = try api.run(
            ["serve", "production"],
            environment: ["PUSHCHAT_DATABASE_URL": "postgres://u:pw@127.0.0.1/db", "PUSHCHAT_API_PORT": "http"]
        )
        #expect(result.status == 78)
        #expect(
            result.standardError
                == "pushchat-api: configuration error: PUSHCHAT_API_PORT: expected a port number from 0 to 65535, got 'http'\n"
        )
    }

    @Test func anUnknownModeIsRefused() throws {
        let result = try api.run(["staging"])
        #expect(result.status != 0)
        #expect(result.standardError.contains("staging"))
    }

    @Test func migrateAppliesThenReportsUpToDateAndStatus() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let environment = [
                "PUSHCHAT_DATABASE_URL": url.connectionString,
                "PUSHCHAT_MIGRATIONS_DIR": TestDatabase.migrationsDirectory,
            ]
            let first = try api.run(["migrate", "development"], environment: environment)
            #expect(first.status == 0, "\(first.standardError)")
            #expect(first.standardOutput.contains("applied 001_initial_schema.sql"))
            let second = try api.run(["migrate", "development"], environment: environment)
            #expect(second.standardOutput == "database is up to date\n")
            let status = try api.run(["migrate", "--status", "development"], environment: environment)
            #expect(status.standardOutput.hasPrefix("001_initial_schema.sql  applied "))
        }
    }

    @Test func migrateAgainstAnUnreachableDatabaseFailsClearly() throws {
        let result = try api.run(
            ["migrate", "development"],
            environment: [
                "PUSHCHAT_DATABASE_URL": "postgres://u:hunter2@127.0.0.1:1/db?sslmode=disable",
                "PUSHCHAT_MIGRATIONS_DIR": TestDatabase.migrationsDirectory,
            ]
        )
        #expect(result.status == 1)
        #expect(result.standardError.hasPrefix("pushchat-api migrate: connecting to postgres://u:***@127.0.0.1:1/db"))
        #expect(!result.standardError.contains("hunter2"))
    }
}
