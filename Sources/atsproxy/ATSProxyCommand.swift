import ArgumentParser

/// `atsproxy`: an HTTPS debugging proxy that applies an app's App Transport Security policy on the wire.
@main
struct ATSProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "atsproxy",
        abstract: "An intercepting HTTPS proxy that simulates Apple's App Transport Security.",
        version: "0.1.0",
        subcommands: [
            RunCommand.self, ExplainCommand.self, LintCommand.self, CACommand.self, DiagnoseCommand.self,
            ReportCommand.self, PassthroughCommand.self, ShowCommand.self, HarCommand.self, ViewCommand.self,
            CaptureCommand.self, RulesCommand.self, ReplayCommand.self,
        ]
    )

    /// Parses the command line with `run --capture` allowed without a file name.
    static func main() async {
        await main(CaptureOptions.expandingBareCapture(Array(CommandLine.arguments.dropFirst())))
    }
}
