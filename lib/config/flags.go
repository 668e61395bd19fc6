package config

import (
	"github.com/spf13/pflag"
)

// Flag names defined by BindFlags.
const (
	FlagConfig    = "config"
	FlagDataDir   = "data-dir"
	FlagName      = "name"
	FlagAPI       = "api"
	FlagGossip    = "gossip"
	FlagAdvertise = "advertise"
	FlagJoin      = "join"
	FlagJoinToken = "join-token"
	FlagLogLevel  = "log-level"
	FlagLogFormat = "log-format"
	FlagLabel     = "label"
)

// flagKey maps a flag to the config key it sets.
type flagKey struct {
	flag, key string
}

// flagKeys lists the flags that set a config key directly (--label merges into
// labels and --config names the file; both are handled on their own).
func flagKeys() []flagKey {
	return []flagKey{
		{FlagDataDir, "data_dir"},
		{FlagName, "name"},
		{FlagAPI, "api.address"},
		{FlagGossip, "cluster.bind"},
		{FlagAdvertise, "cluster.advertise"},
		{FlagJoin, "cluster.join"},
		{FlagJoinToken, "cluster.join_token"},
		{FlagLogLevel, "log.level"},
		{FlagLogFormat, "log.format"},
	}
}

// BindFlags defines hf-node's configuration flags on fs. Load applies only the
// flags that were given, so a flag's default never hides the file or the
// environment.
func BindFlags(fs *pflag.FlagSet) {
	fs.String(FlagConfig, "", "YAML config file (env HF_CONFIG); none by default")
	fs.String(FlagDataDir, "", "data directory (default /var/lib/hf as root, else ~/.local/share/hf)")
	fs.String(FlagName, "", "node name (default: generated once and kept in the data dir)")
	fs.String(FlagAPI, DefaultAPIAddress, "REST API listen address host:port")
	fs.String(FlagGossip, DefaultGossipAddress, "gossip bind address host:port")
	fs.String(FlagAdvertise, "", "gossip address other nodes use to reach this one, host:port")
	fs.StringSlice(FlagJoin, nil, "address (host[:port]) of a cluster member to join; repeat or comma-separate")
	fs.String(FlagJoinToken, "", "join token of the cluster (hf-cli cluster join-token), to fetch its secrets on the first start")
	fs.String(FlagLogLevel, LogInfo, "log level: debug, info, warn or error")
	fs.String(FlagLogFormat, LogText, "log format: text or json")
	fs.StringArray(FlagLabel, nil, "node label key=value; repeat or comma-separate")
}

// changedFlag returns a flag of fs that was given on the command line, or nil.
func changedFlag(fs *pflag.FlagSet, name string) *pflag.Flag {
	if fs == nil {
		return nil
	}
	f := fs.Lookup(name)
	if f == nil || !f.Changed {
		return nil
	}
	return f
}

// flagValues returns a flag's values, split on commas: a repeatable flag yields
// one entry per occurrence and comma-separated part.
func flagValues(f *pflag.Flag) []string {
	sv, ok := f.Value.(pflag.SliceValue)
	if !ok {
		return splitList(f.Value.String())
	}
	var out []string
	for _, v := range sv.GetSlice() {
		out = append(out, splitList(v)...)
	}
	return out
}
