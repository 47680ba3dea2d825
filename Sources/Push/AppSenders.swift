import APNsTransport
import Foundation
import Logging
import Settings
import Storage
import Support

/// The senders of the apps beside the default one (`apps` table): one connection per enabled app with settings of its
/// own, opened while the app has rows and closed when idle, with the app's credentials, topic, transport and
/// environment. Reads the apps every `apps_refresh` (the poll interval, at least 5 s): an app added, updated or
/// disabled is picked up without a restart. An app whose files cannot be used is refused with one line and an alarm
/// in `/readyz` (its rows stay queued) while the others keep sending; it is tried again at each refresh.
struct AppSenders: Sendable {
    let configuration: Configuration
    let context: WorkerContext
    let catalog: AppCatalog

    var logger: Logger { context.logger }
    var refresh: Duration { max(configuration.pollInterval, .seconds(5)) }

    /// A running app sender: the settings it was started with and its own stop.
    struct Running {
        let updatedAt: Date
        let shutdown: ShutdownFlag
    }

    func run() async {
        var running: [String: Running] = [:]
        var refused: [String: (updatedAt: Date, reason: String)] = [:]
        await withTaskGroup(of: Void.self) { senders in
            while !context.shutdown.isRequested {
                if let apps = try? await catalog.apps() {
                    let wanted = Dictionary(
                        apps.filter { $0.disabledAt == nil && $0.settings != nil && $0.name != App.defaultName }.map { ($0.name, $0) },
                        uniquingKeysWith: { first, _ in first }
                    )
                    for (name, sender) in running where wanted[name]?.updatedAt != sender.updatedAt {
                        logger.info("App \(name) was \(wanted[name] == nil ? "disabled" : "updated"): closing its connection")
                        sender.shutdown.request()
                        running[name] = nil
                    }
                    for name in refused.keys where wanted[name] == nil {
                        refused[name] = nil
                        context.status.appUsable(name)
                        context.metrics.appUsable(name, nil)
                    }
                    for (name, app) in wanted.sorted(by: { $0.key < $1.key }) where running[name] == nil {
                        guard let settings = app.settings else { continue }
                        do {
                            let appConfiguration = try forApp(settings)
                            let sources = try DestinationRegistry.load(appConfiguration)
                            if refused.removeValue(forKey: name) != nil { logger.notice("App \(name): its settings can be used again") }
                            context.status.appUsable(name)
                            context.metrics.appUsable(name, true)
                            if let expiry = try? appConfiguration.apns.certificateExpiry() {
                                context.metrics.certificateExpires(expiry, app: name)
                            }
                            let shutdown = ShutdownFlag(signal: context.signal)
                            running[name] = Running(updatedAt: app.updatedAt, shutdown: shutdown)
                            var appLogger = logger
                            appLogger[metadataKey: "push.app"] = "\(name)"
                            appLogger.info(
                                "App \(name): \(settings.bundleID) in \(settings.environment.rawValue), \(DestinationRegistry.describe(sources))"
                            )
                            for source in sources {
                                let context = context.forApp(name, platform: source.platform, shutdown: shutdown)
                                senders.addTask { [appLogger] in
                                    await SenderLanes.run(source, lanes: [.app], context: context, logger: appLogger)
                                }
                            }
                        } catch {
                            let reason = String(describing: error)
                            if refused[name]?.updatedAt != app.updatedAt || refused[name]?.reason != reason {
                                logger.error(
                                    "App \(name) cannot send: \(reason); its notifications stay queued, the other apps keep sending",
                                    metadata: ["push.app": "\(name)"]
                                )
                            }
                            refused[name] = (app.updatedAt, reason)
                            context.status.appUnusable(name, reason: reason)
                            context.metrics.appUsable(name, false)
                        }
                    }
                }
                let deadline = ContinuousClock.now + refresh
                while !context.shutdown.isRequested, ContinuousClock.now < deadline {
                    let generation = context.signal.generation
                    await context.signal.wait(after: generation, timeout: min(.seconds(1), deadline - .now))
                }
            }
            for sender in running.values { sender.shutdown.request() }
            await senders.waitForAll()
        }
    }

    /// The configuration an app's senders load from: its APNs settings in place of the default app's
    /// (`APNsSettings.forApp`), and its own FCM service account and VAPID key or none (never the default app's).
    func forApp(_ settings: App.Settings) throws -> Configuration {
        var appConfiguration = configuration
        appConfiguration.apns = try configuration.apns.forApp(settings)
        appConfiguration.fcm.serviceAccountFile = settings.fcmServiceAccountFile
        appConfiguration.webPush.vapidKeyFile = settings.webPushVAPIDKeyFile
        appConfiguration.webPush.subject = settings.webPushSubject ?? configuration.webPush.subject
        return appConfiguration
    }
}
