// Command kvnode is a CometBFT v0.38 node with the kvstore application in its own process,
// for tests: the application emits block events (finalize_block_events) and, with
// KVNODE_RETAIN_BLOCKS=N, keeps only the last N blocks. It takes the cometbft command's init
// and node subcommands and flags.
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/cometbft/cometbft/abci/example/kvstore"
	cmd "github.com/cometbft/cometbft/cmd/cometbft/commands"
	cfg "github.com/cometbft/cometbft/config"
	"github.com/cometbft/cometbft/libs/cli"
	"github.com/cometbft/cometbft/libs/log"
	nm "github.com/cometbft/cometbft/node"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	"github.com/cometbft/cometbft/proxy"
)

func main() {
	retain, err := strconv.ParseInt(os.Getenv("KVNODE_RETAIN_BLOCKS"), 10, 64)
	if err != nil && os.Getenv("KVNODE_RETAIN_BLOCKS") != "" {
		fmt.Fprintln(os.Stderr, "kvnode: KVNODE_RETAIN_BLOCKS:", err)
		os.Exit(2)
	}
	newNode := func(config *cfg.Config, logger log.Logger) (*nm.Node, error) {
		kv := kvstore.NewInMemoryApplication()
		kv.RetainBlocks = retain
		kv.SetGenBlockEvents()
		nodeKey, err := p2p.LoadOrGenNodeKey(config.NodeKeyFile())
		if err != nil {
			return nil, err
		}
		return nm.NewNode(config,
			privval.LoadOrGenFilePV(config.PrivValidatorKeyFile(), config.PrivValidatorStateFile()),
			nodeKey,
			proxy.NewLocalClientCreator(kv),
			nm.DefaultGenesisDocProviderFunc(config),
			cfg.DefaultDBProvider,
			nm.DefaultMetricsProvider(config.Instrumentation),
			logger)
	}
	root := cmd.RootCmd
	root.AddCommand(cmd.InitFilesCmd, cmd.ShowNodeIDCmd, cmd.VersionCmd, cmd.NewRunNodeCmd(newNode))
	if err := cli.PrepareBaseCmd(root, "CMT", os.ExpandEnv("$HOME/.cometbft")).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kvnode:", err)
		os.Exit(1)
	}
}
