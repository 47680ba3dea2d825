import APNs
import ArgumentParser
import FCM
import Foundation
import Logging
import Observability
import ServiceLifecycle
import Settings
import Simulator
import Support
import UnixSignals

/// `pushchat-apns-sim`: a local stand-in for Apple's binary gateway and feedback service.
@main
struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushchat-apns-sim",
        abstract:
            "A local APNs simulator: binary gateway, feedback service, HTTP/2 API and a status page, on loopback; FCM and its token endpoint with --fcm-service-account.",
        discussion: "Create its certificates first with deploy/dev-certs.sh DIR."
    )

    @Option(help: "Folder with ca.pem, server.pem and server-key.pem (made by deploy/dev-certs.sh).")
    var certs = ".local/certs"
    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"
    @Option(help: "Binary gateway port (0: any free port).")
    var gatewayPort = 2195
    @Option(help: "Feedback service port (0: any free port).")
    var feedbackPort = 2196
    @Option(name: .customLong("http2-port"), help: "HTTP/2 provider API port (0: any free port).")
    var http2Port = 2197
    @Option(
        help:
            "HTTP/2 token authentication: a signing key's public half (PEM), repeatable; its key id from its name AuthKey_<KEY ID>.pub.pem, else --key-id (default: every AuthKey_*.pub.pem in --certs)."
    )
    var authKey: [String] = []
    @Option(help: "HTTP/2 token authentication: the key id of an --auth-key whose file name does not carry one.")
    var keyID = "DEVKEY0001"
    @Option(help: "HTTP/2 token authentication: the team id tokens must name.")
    var teamID = "DEVTEAM001"
    @Option(help: "HTTP/2: an app's bundle id, repeatable: the apns-topics accepted (with push types' suffixes; default: any).")
    var topic: [String] = []
    @Option(help: "HTTP/2: SETTINGS_MAX_CONCURRENT_STREAMS advertised.")
    var maxStreams = 1000
    @Option(help: "Status page port (0: any free port).")
    var statusPort = 8095
    @Flag(help: "Do not serve the status page.")
    var noStatus = false
    @Option(
        name: .customLong("webhook-secret"),
        help: "A webhook's secret (whsec_…, repeatable): the status page's POST /webhooks refuses a POST no secret signed (401)."
    )
    var webhookSecrets: [String] = []
    @Option(help: "File of hex device tokens (one per line) answered with status 8, invalid token.")
    var unregistered: String?
    @Option(help: "File of feedback tuples, one per line: HEX-TOKEN EPOCH-SECONDS.")
    var feedback: String?
    @Option(help: "Feedback service fault: none, truncated, garbage, hang, unclean (no TLS close_notify) or unclean-truncated.")
    var feedbackFault = "none"
    @Option(help: "Append every accepted notification to this JSON-lines file.")
    var record: String?
    @Option(help: "With --record: only notifications whose device token starts with this (the others are counted only).")
    var recordTokens: String?
    @Option(help: "Close each gateway connection abruptly after N notifications.")
    var closeAfter: Int?
    @Option(help: "Answer status 10 (shutdown) after N notifications on each connection.")
    var shutdownAfter: Int?
    @Option(help: "Wait this many milliseconds before each read (backpressure).")
    var readDelayMs: Int?
    @Option(help: "Refuse every connection for this many seconds after start.")
    var refuseFor: Double?
    @Option(
        name: .customLong("fcm-service-account"),
        help:
            "Play Google too: a Firebase service-account JSON file whose assertions the token endpoint takes (its public key) and whose project takes messages; repeatable. deploy/dev-certs.sh makes fcm-service-account.json."
    )
    var fcmServiceAccount: [String] = []
    @Option(
        name: .customLong("fcm-port"),
        help: "Google's side (FCM and the token endpoint, one TLS port) with --fcm-service-account (0: any free port)."
    )
    var fcmPort = 2198
    @Option(name: .customLong("fcm-unregistered"), help: "File of FCM registration tokens (one per line) answered 404 UNREGISTERED.")
    var fcmUnregistered: String?
    @Option(
        name: .customLong("webpush-port"),
        help:
            "Play the browsers' push service (Web Push) on this TLS port; browsers subscribe with POST /browsers on the status page (0: any free port)."
    )
    var webPushPort: Int?
    @Option(
        name: .customLong("webpush-answer"),
        help: "With --webpush-port: answer every push message with this status instead of delivering it (404, 410, 413, 429 or 503)."
    )
    var webPushAnswer: Int?
    @Flag(
        name: .customLong("webpush-http1-only"),
        help: "With --webpush-port: speak HTTP/1.1 only, as a push service without HTTP/2 (otherwise HTTP/2 and HTTP/1.1, by ALPN)."
    )
    var webPushHTTP1Only = false
    @Option(
        help:
            "Event-loop threads serving the connections, each connection on one of them in turn (1: all on one thread; Apple's and Google's servers serve a provider's connections apart)."
    )
    var threads = 1
    @Option(help: "Log level.")
    var logLevel = "info"

    func run() async throws {
        let logger: Logger
        let simulator: APNsSimulator
        do {
            logger = try LogSetup.bootstrap(label: "pushchat-apns-sim", level: Logger.Level(rawValue: logLevel) ?? .info, file: nil)
            guard (1...64).contains(threads) else { throw ValidationError("--threads must be 1 to 64, not \(threads)") }
            simulator = try APNsSimulator(configuration: try makeConfiguration(), logger: logger, threads: threads)
        } catch {
            ProcessFailure.printError("pushchat-apns-sim", "\(error)")
            throw ExitCode(1)
        }
        let group = ServiceGroup(configuration: .init(services: [simulator], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            ProcessFailure.printError("pushchat-apns-sim", "\(error)")
            throw ExitCode(1)
        }
    }

    func makeConfiguration() throws -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration(certificateDirectory: certs)
        configuration.host = host
        configuration.gatewayPort = gatewayPort
        configuration.feedbackPort = feedbackPort
        configuration.statusPort = noStatus ? nil : statusPort
        configuration.webhookSecrets = webhookSecrets
        configuration.http2Port = http2Port
        configuration.http2.topics = topic
        configuration.http2.maxConcurrentStreams = maxStreams
        let keys =
            authKey.isEmpty
            ? ((try? FileManager.default.contentsOfDirectory(atPath: certs)) ?? []).sorted()
                .filter { $0.hasPrefix("AuthKey_") && $0.hasSuffix(".pub.pem") }.map { certs + "/" + $0 }
            : authKey
        for path in keys {
            guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw SimulatorError(reason: "cannot read --auth-key \(path)")
            }
            let name = (path as NSString).lastPathComponent
            let named = name.hasPrefix("AuthKey_") && name.hasSuffix(".pub.pem") ? String(name.dropFirst(8).dropLast(8)) : nil
            configuration.http2.verifiers.append(try ProviderTokenVerifier(keyID: named ?? keyID, teamID: teamID, publicKeyPEM: pem))
        }
        if !fcmServiceAccount.isEmpty {
            configuration.fcmPort = fcmPort
            configuration.fcm.accounts = try fcmServiceAccount.map { SimulatorConfiguration.FCMAccount(try ServiceAccount(file: $0)) }
        }
        if let fcmUnregistered { configuration.fcm.unregisteredTokens = Set(try Self.lines(of: fcmUnregistered)) }
        configuration.webPushPort = webPushPort
        configuration.webPush.http1Only = webPushHTTP1Only
        if let webPushAnswer {
            guard [404, 410, 413, 429, 503].contains(webPushAnswer) else {
                throw SimulatorError(reason: "--webpush-answer is one of 404, 410, 413, 429, 503 (got \(webPushAnswer))")
            }
            configuration.webPush.answer = webPushAnswer
        }
        configuration.recordFile = record
        configuration.recordTokenPrefix = recordTokens
        if let unregistered {
            configuration.unregisteredTokens = Set(try Self.lines(of: unregistered).map { $0.lowercased() })
        }
        if let feedback {
            configuration.feedbackTuples = try Self.lines(of: feedback).map { line in
                let parts = line.split(whereSeparator: \.isWhitespace)
                guard parts.count == 2, let token = DeviceToken.bytes(hex: String(parts[0])), let time = UInt32(parts[1]) else {
                    throw SimulatorError(reason: "\(feedback): expected 'HEX-TOKEN EPOCH-SECONDS', got '\(line)'")
                }
                return FeedbackTuple(timestamp: time, token: token)
            }
        }
        guard let fault = SimulatorConfiguration.FeedbackFault(rawValue: feedbackFault) else {
            throw SimulatorError(
                reason:
                    "--feedback-fault must be one of \(SimulatorConfiguration.FeedbackFault.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        configuration.feedbackFault = fault
        configuration.faults.closeAfterFrames = closeAfter
        configuration.faults.shutdownAfterFrames = shutdownAfter
        configuration.faults.readDelay = readDelayMs.map { .milliseconds($0) }
        configuration.faults.refuseConnectionsFor = refuseFor.map { .milliseconds(Int64($0 * 1000)) }
        return configuration
    }

    /// Non-empty lines of a file, without `#` comments.
    static func lines(of path: String) throws -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else { throw SimulatorError(reason: "cannot read \(path)") }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            let text = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0].trimmingCharacters(in: .whitespaces)
            return text.isEmpty ? nil : text
        }
    }
}
