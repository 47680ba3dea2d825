import ArgumentParser
import Foundation
import Settings
import Storage
import Support
import Webhooks

/// `pushchat-api webhooks add|list|remove|rotate|disable|enable`: the receivers of delivery events (issue 45), changed
/// as the schema's owner (the services' role only reads them).
struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "Add, list, rotate, disable and remove the receivers of delivery events (signed POSTs, Standard Webhooks).",
        subcommands: [Add.self, List.self, Remove.self, Rotate.self, Disable.self, Enable.self]
    )

    /// A refused webhooks command: one line, exit 1.
    struct Refusal: PushChatError {
        typealias Code = ErrorCode<Refusal>
        var code: Code { .init("refused") }
        let reason: String
        var description: String { reason }
    }

    /// How long the secret before a rotation keeps signing beside the new one.
    static let rotationOverlap: Duration = .seconds(24 * 3600)

    static func validName(_ name: String) throws {
        guard name.wholeMatch(of: /[A-Za-z0-9][A-Za-z0-9._-]{0,63}/) != nil else {
            throw ValidationError("a webhook name is 1 to 64 letters, digits, '.', '-' or '_', starting with a letter or digit")
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a webhook and print its signing secret, alone on the last line (shown once)."
        )
        @Argument(help: "The webhook's name: 1 to 64 letters, digits, '.', '-', '_'.")
        var name: String
        @Option(help: "Where events are POSTed: https (http only for a host:port listed in webhook_private_hosts).")
        var url: String
        @Option(help: "The app whose events it receives (default: \(App.defaultName)).")
        var app: String = App.defaultName
        @Option(
            help: """
                Event types, comma-separated: \(WebhookEventType.allCases.map(\.rawValue).joined(separator: ", ")); chat adds chat \
                messages' rows to the sent and failed events (default: every type but notification.sent).
                """
        )
        var events: String?
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func validate() throws {
            try WebhooksCommand.validName(name)
            if let events { _ = try WebhooksCommand.parseEvents(events) }
        }

        func run() async throws {
            try await ProcessFailure.report(program: "pushchat-api webhooks add") {
                let settings = try options.configuration().webhooks
                let checked = try await WebhooksCommand.check(url, privateHosts: settings.privateHosts)
                let chosen = try events.map(WebhooksCommand.parseEvents) ?? WebhooksCommand.defaultEvents
                try await QueueCommand.withConnection(options, program: "pushchat-api webhooks add", role: owner) { connection, logger in
                    guard try await AppAdmin(connection: connection, logger: logger).find(app) != nil else {
                        throw Refusal(reason: "no app named \(app) (pushchat-api apps list)")
                    }
                    let secret = WebhookSecret.generate()
                    guard
                        try await WebhookAdmin(connection: connection, logger: logger).add(
                            name: name,
                            app: app,
                            url: checked.description,
                            secret: secret.text,
                            events: chosen
                        )
                    else { throw Refusal(reason: "a webhook named \(name) exists; choose another name or remove it first") }
                    print("Added webhook \(name) for app \(app): \(checked) (events \(chosen.joined(separator: ","))).")
                    print("Its signing secret (verify each POST's webhook-signature with it; not shown again):")
                    print(secret.text)
                }
            }
        }
    }

    /// The default types: every one but `notification.sent` (a million-device broadcast is a million of those).
    static let defaultEvents = WebhookEventType.defaults.sorted().map(\.rawValue)

    /// `--events`: known types, each once; `chat` alone means the default types for chat messages too.
    static func parseEvents(_ text: String) throws -> [String] {
        var chosen: Set<WebhookEventType>
        do {
            chosen = try WebhookEventType.parseList(text)
        } catch let error as WebhookError {
            throw ValidationError(error.reason)
        }
        if chosen == [.chat] { chosen.formUnion(WebhookEventType.defaults) }
        return chosen.sorted().map(\.rawValue)
    }

    /// The URL's rules, and its host's addresses now (refused inside the network unless listed).
    static func check(_ text: String, privateHosts: Set<String>) async throws -> WebhookURL {
        do {
            let url = try WebhookURL(parsing: text, privateHosts: privateHosts)
            guard !url.isListed(in: privateHosts), ClientAddress(url.host) == nil else { return url }
            let addresses: [ClientAddress]
            do {
                addresses = try await HostResolver.addresses(host: url.host, port: url.port)
            } catch let error as HostResolver.Failure {
                throw Refusal(reason: "\(error.description): a webhook's host must resolve")
            }
            try url.check(resolved: addresses, privateHosts: privateHosts)
            return url
        } catch let error as WebhookError {
            throw Refusal(reason: error.reason)
        }
    }

    /// One change to the webhook `name` as the owner, then `done` printed; refused when there is no webhook of that name.
    static func change(
        _ command: String,
        _ name: String,
        _ options: ProcessOptions,
        _ owner: RoleOption,
        done: String,
        _ body: (WebhookAdmin) async throws -> Bool
    ) async throws {
        try await QueueCommand.withConnection(options, program: "pushchat-api webhooks \(command)", role: owner) { connection, logger in
            guard try await body(WebhookAdmin(connection: connection, logger: logger)) else {
                throw Refusal(reason: "no webhook named \(name)")
            }
            print(done)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List webhooks: name, app, URL, events, waiting POSTs, failures, last error, disabled and why."
        )
        @OptionGroup var options: ProcessOptions

        func run() async throws {
            try await QueueCommand.withConnection(options, program: "pushchat-api webhooks list") { connection, logger in
                let webhooks = try await WebhookAdmin(connection: connection, logger: logger).list()
                print("name\tapp\turl\tevents\twaiting\toldest\tfailures\tlast error\tdisabled")
                for webhook in webhooks {
                    let oldest = webhook.oldestPending.map { $0.formatted(.iso8601) } ?? "-"
                    let disabled =
                        webhook.disabledAt.map { "\($0.formatted(.iso8601)) \(webhook.disabledReason ?? "")" } ?? "-"
                    let events = webhook.events.joined(separator: ",") + (webhook.rotating ? " (rotating: two signatures)" : "")
                    print(
                        "\(webhook.name)\t\(webhook.app)\t\(webhook.url)\t\(events)\t\(webhook.pending)\t\(oldest)\t\(webhook.failures)\t\(webhook.lastError ?? "-")\t\(disabled)"
                    )
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a webhook and the events waiting for it.")
        @Argument(help: "The webhook's name.")
        var name: String
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func run() async throws {
            try await WebhooksCommand.change("remove", name, options, owner, done: "Removed webhook \(name)") {
                try await $0.remove(name: name)
            }
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a webhook a new signing secret and print it on the last line; the old one signs beside it for 24 h."
        )
        @Argument(help: "The webhook's name.")
        var name: String
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func run() async throws {
            let secret = WebhookSecret.generate()
            let done = "Rotated webhook \(name)'s secret: POSTs carry both signatures for 24 h, then only the new one's:\n\(secret.text)"
            try await WebhooksCommand.change("rotate", name, options, owner, done: done) {
                try await $0.rotate(name: name, secret: secret.text, overlap: WebhooksCommand.rotationOverlap)
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop a webhook: no events are written for it or sent until it is enabled."
        )
        @Argument(help: "The webhook's name.")
        var name: String
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func run() async throws {
            try await WebhooksCommand.change("disable", name, options, owner, done: "Disabled webhook \(name)") {
                try await $0.disable(name: name, reason: "disabled by hand")
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a disabled webhook again: what still waits for it is sent at once."
        )
        @Argument(help: "The webhook's name.")
        var name: String
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func run() async throws {
            try await WebhooksCommand.change("enable", name, options, owner, done: "Enabled webhook \(name)") {
                try await $0.enable(name: name)
            }
        }
    }
}
