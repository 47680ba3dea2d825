import API
import ArgumentParser
import Foundation
import Settings
import Storage
import Support

/// `pushchat-api keys create|list|revoke`: the provider API's keys.
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Create, list and revoke the provider API's keys (Authorization: Bearer KEY).",
        subcommands: [Create.self, List.self, Revoke.self]
    )

    /// A refused keys command: one line, exit 1.
    struct Refusal: PushChatError {
        typealias Code = ErrorCode<Refusal>
        var code: Code { .init("refused") }
        let reason: String
        var description: String { reason }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a key and print it, alone on the last line (shown once: only its hash is stored)."
        )
        @Argument(help: "Who the key is for: 1 to 64 letters, digits, '.', '-', '_'.")
        var name: String
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption
        @Option(
            name: .customLong("requests-per-minute"),
            help: "Requests the key may make per minute (0: no limit; default \(Self.defaultRequests))."
        )
        var requestsPerMinute: Int?
        @Option(
            name: .customLong("recipients-per-minute"),
            help: "Notifications (recipients) the key may queue per minute (0: no limit; default \(Self.defaultRecipients))."
        )
        var recipientsPerMinute: Int?
        @Flag(help: "No request or recipient limit (a broadcast to every device must go through in one request).")
        var unlimited = false
        @Option(
            name: .customLong("scope"),
            help:
                "What the key may do, repeatable: \(KeyScope.allCases.map(\.rawValue).joined(separator: ", ")) (default: send, devices:write, status)."
        )
        var scopes: [String] = []
        @Option(help: "The app the key works in: it sees and sends only within it (default: \(App.defaultName)).")
        var app: String = App.defaultName

        /// New keys are limited unless told otherwise: a leaked key cannot queue without bound.
        static let defaultRequests = 6_000
        static let defaultRecipients = 100_000

        var limits: (requests: Int, recipients: Int) {
            if unlimited { return (0, 0) }
            return (requestsPerMinute ?? Self.defaultRequests, recipientsPerMinute ?? Self.defaultRecipients)
        }

        var chosenScopes: Set<KeyScope> {
            scopes.isEmpty ? KeyScope.defaults : Set(scopes.compactMap(KeyScope.init(rawValue:)))
        }

        func validate() throws {
            guard APIKey.isValidName(name) else {
                throw ValidationError("a key name is 1 to 64 letters, digits, '.', '-' or '_', starting with a letter or digit")
            }
            guard !unlimited || (requestsPerMinute == nil && recipientsPerMinute == nil) else {
                throw ValidationError("--unlimited and a per-minute limit contradict each other; give one")
            }
            guard (0...1_000_000_000).contains(limits.requests), (0...1_000_000_000).contains(limits.recipients) else {
                throw ValidationError("limits are whole numbers from 0 (no limit) to 1000000000")
            }
            if let unknown = scopes.first(where: { KeyScope(rawValue: $0) == nil }) {
                throw ValidationError("--scope \(unknown): expected one of \(KeyScope.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }

        func run() async throws {
            try await QueueCommand.withConnection(options, program: "pushchat-api keys create", role: owner) { connection, logger in
                guard try await AppAdmin(connection: connection, logger: logger).find(app) != nil else {
                    throw Refusal(reason: "no app named \(app) (pushchat-api apps list)")
                }
                let key = APIKey.generate()
                let admin = KeyAdmin(connection: connection, logger: logger)
                guard
                    try await admin.create(
                        name: name,
                        hash: APIKey.hash(key),
                        requestsPerMinute: limits.requests,
                        recipientsPerMinute: limits.recipients,
                        scopes: chosenScopes,
                        app: app
                    )
                else { throw Refusal(reason: "a key named \(name) exists (revoked keys keep their name); choose another name") }
                let described = [
                    limits.requests > 0 ? "\(limits.requests) requests/min" : "unlimited requests",
                    limits.recipients > 0 ? "\(limits.recipients) recipients/min" : "unlimited recipients",
                    "scopes \(chosenScopes.sorted().map(\.rawValue).joined(separator: ","))",
                ]
                print("Created key \(name) for app \(app) (\(described.joined(separator: ", "))). Store it now; it is not shown again:")
                print(key)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys: name, app, limits, scopes, created, revoked.")
        @OptionGroup var options: ProcessOptions

        func run() async throws {
            try await QueueCommand.withConnection(options, program: "pushchat-api keys list") { connection, logger in
                let keys = try await KeyAdmin(connection: connection, logger: logger).list()
                print("name\tapp\trequests/min\trecipients/min\tscopes\tcreated\trevoked")
                for key in keys {
                    let revoked = key.revokedAt.map { $0.formatted(.iso8601) } ?? "-"
                    let scopes = key.scopes.sorted().map(\.rawValue).joined(separator: ",")
                    print(
                        "\(key.name)\t\(key.app)\t\(key.requestsPerMinute)\t\(key.recipientsPerMinute)\t\(scopes)\t\(key.createdAt.formatted(.iso8601))\t\(revoked)"
                    )
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a key: its requests get 401 from then on, and its broadcasts under way are canceled."
        )
        @Argument(help: "The key's name.")
        var name: String
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func run() async throws {
            try await QueueCommand.withConnection(options, program: "pushchat-api keys revoke", role: owner) { connection, logger in
                guard let canceled = try await KeyAdmin(connection: connection, logger: logger).revokeCancelingBroadcasts(name: name)
                else {
                    throw Refusal(reason: "no unrevoked key named \(name)")
                }
                print("Revoked key \(name)")
                if canceled.broadcasts > 0 {
                    print(
                        "Canceled its \(canceled.broadcasts) broadcast(s) under way: \(canceled.rows) queued notification(s) will not be sent"
                    )
                }
            }
        }
    }
}
