package conformance

// Described is a name the kit knows (a variable of the environment, a
// capability) with one line on what it is, for the help of bothy
// conformance and the documentation.
type Described struct {
	Name, Line string
}

// The variables the kit sets in the adapter's environment.
const (
	envServer       = "BOTHY_SERVER"
	envToken        = "BOTHY_AGENT_TOKEN"
	envModelBase    = "BOTHY_MODEL_BASE_URL"
	envModelKey     = "BOTHY_MODEL_API_KEY"
	envModelName    = "BOTHY_MODEL_NAME"
	envTools        = "BOTHY_TOOLS"
	envKitTools     = "BOTHY_CONFORMANCE_TOOLS"
	envKitDebug     = "BOTHY_CONFORMANCE_DEBUG"
	modelAPIKey     = "conformance-key"
	modelName       = "conformance-model"
	modelBaseSuffix = "/v1"
)

// AdapterEnvironment lists the variables the kit sets for the adapter
// (on top of its own environment), in the order of the help.
func AdapterEnvironment() []Described {
	return []Described{
		{envServer, "the kit's server (through the kit's proxy): /graphql, /api/v1 and /mcp below it"},
		{envToken, "the API token of the agent Lotse, whom the scenarios mention"},
		{envModelBase, "the fake model's API root: {base}/chat/completions (OpenAI) and {base}/messages (Anthropic)"},
		{envModelKey, "a key for the fake model (" + modelAPIKey + "; it takes any)"},
		{envModelName, "the model to ask for (" + modelName + ")"},
		{envTools, "the kit's tools file (file_ticket, send_email, fetch_page; sdk/httptool's format), read by bothy agent run"},
		{envKitTools, "the same tools file, under the kit's own name"},
	}
}

// KitEnvironment lists the variables the kit reads itself.
func KitEnvironment() []Described {
	return []Described{
		{envKitDebug, "when set, the adapter's output goes to the kit's stderr as it is written (the report keeps its last lines anyway)"},
	}
}

// CapabilityLines says what each capability an adapter may declare
// (Options.Capabilities) means, in the order of Capabilities.
func CapabilityLines() []Described {
	return []Described{
		{capModel, "it asks a model at " + envModelBase},
		{capLive, "it streams the model's answer into the run's live box"},
		{capTools, "it runs the tools of " + envTools + ", consequential ones behind the approval gate"},
		{capFiles, "it reads the text of attached files, as data"},
		{capAttach, "it attaches files to its answers (the tool " + attachTool + "; the kit grants the agent files_out)"},
	}
}

// adapterEnv is the adapter's part of the environment (AdapterEnvironment)
// for a kit whose proxy answers at server, whose agent's token is token,
// whose fake model answers at model and whose tools file is tools.
func adapterEnv(server, token, model, tools string) []string {
	return []string{
		envServer + "=" + server,
		envToken + "=" + token,
		envModelBase + "=" + model + modelBaseSuffix,
		envModelKey + "=" + modelAPIKey,
		envModelName + "=" + modelName,
		envTools + "=" + tools,
		envKitTools + "=" + tools,
	}
}
