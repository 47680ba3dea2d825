import ArgumentParser

/// `pushchat-api`: the HTTP API the PushChat app talks to, and the database tools.
@main
struct PushChatAPI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushchat-api",
        abstract: "PushChat Server's HTTP API (wire-compatible with the PushChat iPhone app) and database tools.",
        subcommands: [
            ServeCommand.self, MigrateCommand.self, QueueCommand.self, KeysCommand.self, AppsCommand.self, WebhooksCommand.self,
            WebPushCommand.self, TestPushCommand.self,
        ],
        defaultSubcommand: ServeCommand.self
    )
}
